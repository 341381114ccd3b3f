"""One module per reproduced figure or table; each returns data and writes files separately."""

"""One module per paper family."""

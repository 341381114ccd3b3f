"""The scripts of benchmarks/ (the bench table, verdicts, border audit, GPU check) in tiny
configurations, so that they cannot rot between real runs."""

"""Suites about the whole code base rather than one module: contracts every algorithm and optimizer
keeps, golden outputs, layering rules, the docs' code, the Makefile and neighbour audits."""

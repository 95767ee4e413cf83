"""Generators of binlake's generated modules, run by hand against a server: `python -m tools.<name> --help`."""

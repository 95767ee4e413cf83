"""binlake benchmarks: `python -m bench --help`."""

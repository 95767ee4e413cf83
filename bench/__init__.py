"""binlake benchmarks: `python -m bench --help` runs them in one go (with `peer` and `scenarios`).

Focused benches by scenario, each `python -m bench.<scenario>.<module> --help`: `keepup/` (issue 12: keeping up,
follow mode), `snapshot/`, `paths/` (a batch's apply paths), `fuzz/` (the differential fuzzer); the setup they
share is `common.py`.
"""

"""Comparing Delta with the source: chunked digests and row diffs, and their verdicts.

May import: `pipeline` and everything below it."""

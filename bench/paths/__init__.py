"""The apply paths of a batch and what they cost: append vs MERGE, the delta-rs file layout, the writer threshold,
deletion vectors, reading the Delta log, many tables, one huge transaction.

`python -m bench` runs `huge_transaction`; each module also runs alone (`python -m bench.paths.X`).
"""

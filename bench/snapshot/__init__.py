"""Snapshots: where their time goes, a killed one resumed, the other tables' freshness meanwhile, a Spark cluster.

`python -m bench` runs `snapshot_freshness` and `snapshot_resume`; each module also runs alone
(`python -m bench.snapshot.X`).
"""

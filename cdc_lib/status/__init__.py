"""Observing a pipeline: each table's status, binlog runway, time to catch up.

May import: `source`, `sink`, `state` and what they may import."""

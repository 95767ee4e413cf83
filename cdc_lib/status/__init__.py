"""Observing a pipeline: each table's status, binlog runway, time to catch up, and its metrics (OpenMetrics).

May import: `source`, `sink`, `state` and what they may import."""

"""What a pipeline remembers: offsets and their store, leases and heartbeats, snapshot documents, per-table
offsets, reconcile verdicts, and the context every step shares.

May import: `common`, `model`, `config`, `source`, `changes`, `sink` (and `cdc_lib.errors`)."""

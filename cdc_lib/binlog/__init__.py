"""Binlog to changes: reading the replication stream, buffering transactions, decoding row images, parsing DDL.

May import: `common`, `model`, `config`, `source`, `changes` (and `cdc_lib.errors`)."""

"""The Spark engine: the session and its jars, MERGE/append/overwrite commits, table modes, parallel writes.

May import: `sink`'s shared modules and what `sink` may import; never `sink.delta_rs`."""

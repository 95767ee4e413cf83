"""The snapshot's road: JDBC reads in chunks, watermarks, waves, correction by the binlog, progress.

May import: everything below it (`common` … `state`), `binlog` and `sink` included."""

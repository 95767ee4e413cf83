"""binlake beside the JVM peers teams weigh it against (issue 30): Debezium's embedded engine and Flink CDC's MySQL
source, capture only, on the bench's MariaDB and rows; and CPU seconds per row change for binlake and MariaDB.

Run alone with `python -m bench.peers --rows N --changes M`; `python -m bench` runs it too (`--only peers`).
"""

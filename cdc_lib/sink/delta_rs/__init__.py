"""The delta-rs engine: writes without a JVM, file layout and key rewrites, snapshot waves.

May import: `sink`'s shared modules and what `sink` may import; never `sink.spark`."""

"""The differential fuzzer (`python -m bench.fuzz.fuzz`): random tables, changes and crashes, source vs Delta."""

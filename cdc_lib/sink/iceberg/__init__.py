"""Iceberg metadata beside a Delta table's log, written by binlake itself (`sink.tables.<t>.iceberg`, docs/iceberg.md).

`schema` maps Delta column types to Iceberg types and keeps each column's field id stable; `convert` writes one
Iceberg snapshot listing the live Parquet files of a Delta version. pyiceberg is an optional dependency
(`binlake[iceberg]`): only `convert` imports it, and only callers of a table with `iceberg: true` import `convert`.
"""

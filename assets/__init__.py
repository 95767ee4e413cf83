"""Dagster assets, asset checks and the `binlake` resource built from a pipeline config.

Layers point one way: `orchestration` (assembly: jobs, schedules, sensors, definitions) imports `assets`,
`assets` imports `cdc_lib` (the engine), and never the other way round.
"""

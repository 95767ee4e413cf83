"""Development helpers, not engine modules: a private MariaDB, a private Spark standalone cluster and the demo.

The tests, the bench and `binlake demo` use them; the engine (every `cdc_lib` module outside this package)
never imports them, so nothing here runs in a pipeline. The wheel ships this package because `binlake demo`
is a command users run.
"""

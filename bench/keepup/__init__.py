"""Keeping up with a busy primary (issue 12): the sustainable rate, its costs, the load writer, follow mode.

`keepup_report` runs these inside `python -m bench`; each module also runs alone (`python -m bench.keepup.X`).
"""

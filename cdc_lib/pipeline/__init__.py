"""Putting the stages together: the front door (`Pipeline`), sync batches, follow mode, schema changes, table
failures and resume.

May import: every package above (`common` … `status`)."""

"""Putting the stages together: the front door (`Pipeline`), sync batches, follow mode, schema changes, table
failures, resume and schema policies.

May import: every package above (`common` … `status`)."""

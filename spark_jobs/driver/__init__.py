"""The Spark driver: the session, a job's run, its sources, the writes to Delta, reprocess, SQL and lake commands."""

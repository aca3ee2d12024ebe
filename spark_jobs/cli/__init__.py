"""The command line, one module per command: ``python -m spark_jobs --help``."""

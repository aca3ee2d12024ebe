"""Streaming ETL jobs for Spark Structured Streaming, declared once in :mod:`spark_jobs.registry`.

Usage: ``python -m spark_jobs --help``.
"""

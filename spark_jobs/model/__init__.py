"""Declarations: what jobs, tables, sources and triggers are. No pyspark, no Airflow: the DAG files read them while parsing."""

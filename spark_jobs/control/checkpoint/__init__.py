"""A job's checkpoint without Spark: the single-writer lease, inspection, and the doctor.

Shared by the CLI (``python -m spark_jobs checkpoint inspect|repair``), the runner, the Airflow
sensors and the supervisor; nothing here imports pyspark.
"""

from spark_jobs.control.checkpoint.explain import explain_start_failure
from spark_jobs.control.checkpoint.lease import Lease, LeaseHeld, LeaseInfo, LeaseLost, read_lease

__all__ = ["Lease", "LeaseHeld", "LeaseInfo", "LeaseLost", "explain_start_failure", "read_lease"]

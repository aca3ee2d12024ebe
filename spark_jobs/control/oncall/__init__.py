"""The on-call actions of ``streaming_oncall``, without Airflow and without pyspark.

- :mod:`~spark_jobs.control.oncall.requests`: a request's every field and the job's state checked before anything
  runs, and its plan;
- :mod:`~spark_jobs.control.oncall.approval`: four eyes on the actions that destroy or rewrite data: what a second
  user is asked, and what their answer decides;
- :mod:`~spark_jobs.control.oncall.audit`: the ``ops_audit`` table, one row per action (refused ones and dry runs
  too), through delta-rs.
"""

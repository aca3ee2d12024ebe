"""Supervision of a continuous job's driver: start it, watch it, restart it with backoff, give up once.

The pieces (none imports pyspark, so Airflow, the CLI and the tests share them):

- :mod:`~spark_jobs.control.supervision.state`: ``<lake>/control/<job>/supervisor.json`` (the state a person
  and ``checkpoint inspect`` see) and ``events.jsonl`` (one line per start, restart, give-up, stop).
- :mod:`~spark_jobs.control.supervision.policy`: the backoff, the restart budget and the healthy reset of
  the registry's :class:`~spark_jobs.model.policies.RestartPolicy`.
- :mod:`~spark_jobs.control.supervision.child`: the driver command as a child process in its own process group,
  which dies with its supervisor, stops gracefully and never leaves a process behind.
- :mod:`~spark_jobs.control.supervision.supervisor`: :class:`Supervisor`, the loop that ties them together
  (``python -m spark_jobs supervise JOB`` runs it in the foreground; Airflow's ``supervise`` task
  wraps it).
"""

from spark_jobs.control.supervision.state import SupervisorState, read_events, read_supervisor_state

__all__ = ["SupervisorState", "read_events", "read_supervisor_state"]

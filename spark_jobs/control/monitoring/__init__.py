"""Monitoring of the streaming jobs, without pyspark: progress history, health, incidents, status.

- :mod:`.progress`: each micro-batch's progress as a row of the lake's ``streaming_progress`` table.
- :mod:`.history`: reading that table back (delta-rs).
- :mod:`.health`: one summary per job (state, last commit, backlog, restarts, backoff) and the
  alert conditions of the registry's ``AlertThresholds``.
- :mod:`.incidents`: open and resolved incidents, persisted beside the checkpoint.
- :mod:`.status`: ``python -m spark_jobs status``.
- :mod:`.plots`: server-rendered SVG charts of the history (the health page).
- :mod:`.timeline`: a job's runs, supervisor events, incidents and on-call actions in time order (the health page).
"""

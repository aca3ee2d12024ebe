"""Suricata's EVE log (the ``suricata_eve`` job): :mod:`~spark_jobs.transforms.suricata.parse`, its lines as rows."""

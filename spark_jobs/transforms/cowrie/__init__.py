"""Cowrie's JSON log (the ``cowrie_honeypot`` job): :mod:`~spark_jobs.transforms.cowrie.parse`, its lines as rows."""

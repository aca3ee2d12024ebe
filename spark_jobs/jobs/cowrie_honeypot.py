"""cowrie_honeypot: the Cowrie SSH honeypot's JSON log becomes one typed row per event; bad lines go to quarantine.

Usage::

    python -m spark_jobs run cowrie_honeypot --input landing/cowrie --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run cowrie_honeypot --input landing/cowrie

A file log type: its registry entry (``COWRIE_HONEYPOT``) declares its tables ``cowrie_events`` and
``cowrie_quarantine``, their keys and routes, and the files it reads; the driver derives the two tables' selects.
What a line becomes, what identifies an event and why a line is quarantined: its parser,
:mod:`spark_jobs.transforms.cowrie.parse`.
"""

from spark_jobs.transforms.cowrie.parse import transform

__all__ = ["transform"]

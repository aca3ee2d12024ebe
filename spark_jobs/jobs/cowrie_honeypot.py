"""cowrie_honeypot: the Cowrie SSH honeypot's JSON log, one typed row per event; bad lines quarantined.

Usage::

    python -m spark_jobs run cowrie_honeypot --input landing/cowrie --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run cowrie_honeypot --input landing/cowrie

A file log type: its registry entry, ``COWRIE_HONEYPOT``, declares the rest; its parser is
:mod:`spark_jobs.transforms.cowrie.parse` (what a line becomes, what identifies an event). docs/cowrie-honeypot.md.
"""

from spark_jobs.transforms.cowrie.parse import transform

__all__ = ["transform"]

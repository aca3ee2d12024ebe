"""suricata_eve: Suricata's EVE JSON log (alerts, flows, DNS, HTTP, TLS, ... stats), one typed row per event.

Usage::

    python -m spark_jobs run suricata_eve --input landing/suricata --trigger available-now
    spark-submit --master 'local[2]' spark_jobs/__main__.py run suricata_eve --input landing/suricata

Bad lines go to ``suricata_quarantine``. The registry entry ``SURICATA_EVE`` (a file log type) declares the tables,
keys and files; :mod:`spark_jobs.transforms.suricata.parse` is the parser, with what identifies an event.
See docs/suricata-eve.md.
"""

from spark_jobs.transforms.suricata.parse import transform

__all__ = ["transform"]

"""suricata_ocsf: Suricata EVE events (``suricata_events``, read as a stream) as OCSF rows, one per event, in each class's table.

Usage::

    python -m spark_jobs run suricata_ocsf --trigger available-now

Its registry entry (``SURICATA_OCSF``, an :func:`~spark_jobs.model.ocsf.ocsf_job`) declares the tables; its
mapping is :mod:`spark_jobs.transforms.suricata.ocsf`. docs/ocsf.md.
"""

from spark_jobs.transforms.suricata.ocsf import OUTPUTS, transform

__all__ = ["OUTPUTS", "transform"]

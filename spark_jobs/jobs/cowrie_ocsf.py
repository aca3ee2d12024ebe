"""cowrie_ocsf: Cowrie honeypot events (``cowrie_events``, read as a stream) as OCSF rows, one per event, in each class's table.

Usage::

    python -m spark_jobs run cowrie_ocsf --trigger available-now

Its registry entry (``COWRIE_OCSF``, an :func:`~spark_jobs.model.ocsf.ocsf_job`) declares the tables; its
mapping is :mod:`spark_jobs.transforms.cowrie.ocsf`. docs/ocsf.md.
"""

from spark_jobs.transforms.cowrie.ocsf import OUTPUTS, transform

__all__ = ["OUTPUTS", "transform"]

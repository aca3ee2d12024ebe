"""Reading ``streaming_progress`` back without a JVM (delta-rs), for the health checks, the page and ``status``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from spark_jobs.model.object_store import delta_rs_options
from spark_jobs.control.monitoring.progress import progress_table_path


def read_progress(lake_root: str | Path, stream: str, *, limit: int | None = 300, days: float | None = None,
                  now: datetime | None = None, columns: list[str] | None = None) -> list[dict]:
    """A stream's newest progress rows, oldest first (by trigger time, then batch id).

    :param lake_root: the lake.
    :param stream: ``job`` or ``job@writer``.
    :param limit: at most this many (the newest); None: all.
    :param days: only rows of the last ``days`` (whole date partitions are skipped); None: all.
    :param columns: the columns to read (default: every one).
    :returns: one dict per row; ``[]`` when the table does not exist yet.
    """
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    path = progress_table_path(lake_root)
    if not (path / "_delta_log").is_dir():
        return []
    try:
        dataset = DeltaTable(str(path), storage_options=delta_rs_options(path)).to_pyarrow_dataset()
    except TableNotFoundError:  # a log with no commit yet
        return []
    condition = ds.field("stream") == stream
    if days is not None:
        cutoff = ((now or datetime.now(timezone.utc)) - timedelta(days=days)).date()
        condition = condition & (ds.field("date") >= cutoff)
    table = dataset.to_table(filter=condition, columns=columns)
    if table.num_rows == 0:
        return []
    if "timestamp" in table.column_names and "batch_id" in table.column_names:
        order = pc.sort_indices(table, sort_keys=[("timestamp", "ascending"), ("batch_id", "ascending")])
        table = table.take(order)
    if limit is not None and table.num_rows > limit:
        table = table.slice(table.num_rows - limit)
    return table.to_pylist(maps_as_pydicts="strict")

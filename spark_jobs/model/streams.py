"""What a job reads and how it keeps time: the registry's source, event-time and dimension declarations.

A :class:`~spark_jobs.model.jobs.JobSpec` names its input with one of these:

- :class:`FileSource`: files landing in a folder, read by one of Spark's file sources (``binaryFile``
  for ``cloudtrail_etl``, ``text`` for ``word_count``). ``--input`` / ``$<JOB>_INPUT`` / the registry's
  ``default_input`` name the folder.
- :class:`DeltaTableSource`: another job's Delta table, read as a stream (Delta's streaming source:
  every commit after the checkpoint's offset, in commit order). The folder is the lake's
  ``tables/<table>`` unless ``--input`` names another table folder.
- :class:`KafkaSource`: messages of Kafka topics (Spark's Kafka source); ``--input`` names the topics.

:class:`EventTimeSpec` holds a stateful job's event-time column, watermark delay and windows;
:class:`DimensionSpec` a small reference file joined to every micro-batch (the ``accounts`` file).
Nothing here imports pyspark: Airflow reads the registry while it parses DAG files.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping

from spark_jobs.model.errors import UsageError
from spark_jobs.model.layout import KeyLayout
from spark_jobs.model.times import duration_seconds  # noqa: F401 - the windows' durations; imported from here too

@dataclass(frozen=True)
class FileSource:
    """Files in a landing folder or bucket prefix.

    :param format: ``binaryFile`` (whole files, decoded by the job) or ``text`` (one row per line).
    :param layout: where the files' keys carry their delivery date and time
        (:class:`~spark_jobs.model.layout.KeyLayout`). With one, the job reads through the landing source
        (:mod:`spark_jobs.driver.landing_source`): each trigger lists only the folders of its window, and
        backfills, reprocess and the pipelined write select and bound files by it. Without one, Spark's own
        file source reads the folder (it lists all of it at every trigger).
    :param reconcile_schedule: when the ``<job>_reconcile`` DAG lists the whole landing and ingests what the
        discovery window missed (a cron or Airflow preset); only with a layout.
    """

    format: str = "binaryFile"
    layout: KeyLayout | None = None
    reconcile_schedule: str = "@daily"
    #: Files land in a folder or bucket prefix the job's input names (a landing to list, watch and backfill).
    lands_files: ClassVar[bool] = True

    @property
    def whole_files(self) -> bool:
        """Whether a row is a whole file (``binaryFile``: the job decodes it), not a line of one."""
        return self.format == "binaryFile"

    @property
    def unit(self) -> str:
        """What a micro-batch's input is counted in: ``files`` for whole files, else ``rows``."""
        return "files" if self.whole_files else "rows"

    def registry_input(self, default_input: str) -> str:
        """The input the registry names: the job's ``default_input`` folder."""
        return default_input

    def describe(self) -> str:
        return f"{self.format} files"


@dataclass(frozen=True)
class DeltaTableSource:
    """A lake table read as a stream with Delta's streaming source.

    :param table: the table's registry name (another job's output).
    """

    table: str
    lands_files: ClassVar[bool] = False
    whole_files: ClassVar[bool] = False
    unit: ClassVar[str] = "rows"

    def registry_input(self, default_input: str) -> str:
        """The input the registry names (its table is resolved in the lake; ``--input`` names another folder)."""
        return default_input

    def describe(self) -> str:
        return f"the Delta table {self.table}"


@dataclass(frozen=True)
class KafkaSource:
    """Messages of Kafka topics, read with Spark's Kafka source (``spark-sql-kafka-0-10``).

    ``--input`` / ``$<JOB>_INPUT`` override ``topics``: ``a,b`` subscribes to topics, ``pattern:<regex>``
    to every topic matching the regular expression (Spark's ``subscribePattern``). Where to start, how
    much per micro-batch and what to do about lost data are the job's ``file_source_options``
    (Spark's ``startingOffsets``, ``startingTimestamp``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``).

    :param topics: the default subscription, in the ``--input`` syntax above.
    :param connection_id: the Airflow connection with the brokers and credentials
        (:mod:`spark_jobs.model.kafka_connection`; ``$AIRFLOW_CONN_<ID>``).
    """

    topics: str
    connection_id: str
    lands_files: ClassVar[bool] = False
    whole_files: ClassVar[bool] = False
    unit: ClassVar[str] = "rows"

    def registry_input(self, default_input: str) -> str:
        """The input the registry names: its topics."""
        return self.topics

    def describe(self) -> str:
        return f"the Kafka topics {self.topics} (connection {self.connection_id})"


PATTERN_PREFIX = "pattern:"


def kafka_subscription(spec: str) -> dict[str, str]:
    """Spark's subscription option for ``spec``: ``{"subscribe": "a,b"}`` or ``{"subscribePattern": regex}``.

    :raises UsageError: for an empty spec or a topic name Kafka would refuse, naming it.
    """
    text = str(spec).strip()
    if text.startswith(PATTERN_PREFIX):
        pattern = text[len(PATTERN_PREFIX):]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"Kafka topic pattern {pattern!r} is not a regular expression ({exc})") from None
        if not pattern:
            raise UsageError("Kafka topic pattern is empty; write pattern:<regex>, e.g. pattern:cloudtrail-.*")
        return {"subscribePattern": pattern}
    topics = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in topics if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t)]
    if not topics or bad:
        raise UsageError(f"Kafka topic {(bad or [text])[0]!r} is not a topic name (letters, digits, '.', '_', '-'); "
                         "give topics as a,b or a pattern as pattern:<regex>")
    return {"subscribe": ",".join(topics)}


SourceSpec = FileSource | DeltaTableSource | KafkaSource


@dataclass(frozen=True)
class WindowSpec:
    """One event-time window of a stateful job.

    :param name: the window's name in the tables (``tumbling_5m``); stable, as it is part of their keys.
    :param size: its length, as Spark writes intervals (``5 minutes``).
    :param slide: ``None`` for a tumbling window; else how far consecutive windows start apart (a
        sliding window: each event counts in ``size / slide`` of them).
    """

    name: str
    size: str
    slide: str | None = None

    @property
    def tumbling(self) -> bool:
        return self.slide is None


@dataclass(frozen=True)
class EventTimeSpec:
    """How a stateful job keeps event time.

    :param column: the event-time column of its input.
    :param watermark_delay: Spark's ``withWatermark`` delay: state older than the newest event time
        seen minus this is dropped, and later input for it is late.
    :param windows: the windows it counts in.
    """

    column: str = "eventTime"
    watermark_delay: str = "30 minutes"
    windows: tuple[WindowSpec, ...] = ()


@dataclass(frozen=True)
class DimensionSpec:
    """A small reference file (CSV with a header row, a JSON array, or JSON lines) joined to each micro-batch.

    It is read again for every micro-batch, so an update (replace the file atomically) is used from
    the next micro-batch on. ``$<NAME>_PATH`` (``ACCOUNTS_PATH``) overrides ``default_path``.

    :param name: its name (``accounts``).
    :param default_path: the file, relative to the project root unless absolute.
    :param key: the column rows are joined on.
    :param columns: the other columns it must have, in output order.
    :param key_pattern: a regular expression every key must match (a clear error names a row that does not).
    """

    name: str
    default_path: str
    key: str
    columns: tuple[str, ...]
    key_pattern: str = ".+"

    @property
    def env_var(self) -> str:
        return f"{self.name.upper()}_PATH"

    def path(self) -> Path:
        """The file: ``$<NAME>_PATH``, else ``default_path`` (relative to the project root)."""
        from spark_jobs.model.lake import PROJECT_ROOT

        chosen = Path(os.environ.get(self.env_var) or self.default_path).expanduser()
        return chosen if chosen.is_absolute() else PROJECT_ROOT / chosen


def job_settings(name: str, declared: Mapping[str, str]) -> dict[str, str]:
    """A job's settings: the registry's, with ``$<JOB>_SETTINGS`` (a JSON object) over them.

    :raises UsageError: for JSON that is not an object, or a key the registry does not declare.
    """
    variable = f"{name.upper()}_SETTINGS"
    text = os.environ.get(variable)
    if not text:
        return dict(declared)
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"${variable} is not JSON ({exc}); give an object like '{{\"silent_after\": \"1 hour\"}}'") \
            from None
    if not isinstance(given, dict):
        raise UsageError(f"${variable} must be a JSON object, got {text[:80]!r}")
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise UsageError(f"${variable} names unknown setting(s) {', '.join(unknown)} of job {name}; known: "
                         f"{', '.join(sorted(declared))}")
    return {**declared, **{k: str(v) for k, v in given.items()}}

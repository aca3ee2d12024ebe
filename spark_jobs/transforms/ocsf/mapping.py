"""A log type's OCSF mapping as a declaration, and the one transform and selects every OCSF job shares.

A mapping (:class:`OcsfMapping`) says, for one raw table:

- which class and activity each event becomes, by the value of one column (``routes``: Cowrie's ``eventid``,
  Suricata's ``event_type``, CloudTrail's ``eventName``), with a ``default`` class for the values it does not list
  (or none: such an event is quarantined, ``no_ocsf_class``);
- each class's attribute values (``fields``: a function from a :class:`Reads` to ``{path: Column}``; a field that
  needs logic is a small Column expression there). The source columns a class's fields read are recorded by the
  :class:`Reads` they are read through; every other column with a value goes to ``unmapped`` under its own name, so
  nothing of the source row is lost.

The transform then gives, per raw row: the class's row (a struct per class, :func:`~spark_jobs.transforms.ocsf.
columns.ocsf_row`, with the attributes every row shares: class, category, type, activity and their names, time,
``metadata`` with the pinned version, ``raw_data``, ``unmapped``), its ``class_uid``, and a ``reason`` when OCSF cannot
express it (``no_ocsf_class``; ``missing_required``, naming the attributes, in ``detail``). The registry's routes
send each class's rows to its table and the others to the quarantine (:func:`~spark_jobs.model.ocsf.ocsf_job`).

``raw_data`` is a reference to the source row, ``{"table": ..., "date": ..., "<key>": ...}`` (its key in the raw
table), not the source event: the raw table keeps the event already, and a copy would double what is stored
(docs/ocsf.md measures both). A reader who wants the event joins the raw table on the key (``metadata.uid``) and
``date``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.log_types import INGEST_DATE, PARSED_SOURCE_FILE, REASON
from spark_jobs.model.ocsf import OCSF_CLASSES, OCSF_DATE
from spark_jobs.model.ocsf_schema import OCSF_VERSION, ocsf_schema
from spark_jobs.transforms.ocsf.columns import missing_required, ocsf_row
from spark_jobs.transforms.quarantine import MAX_RAW_CHARS

NO_CLASS = "no_ocsf_class"
MISSING_REQUIRED = "missing_required"
REASONS = (NO_CLASS, MISSING_REQUIRED)
# Columns of a raw table that say where a row came from, not what happened: not copied to unmapped (raw_data
# refers to the row, which keeps them).
LAKE_COLUMNS = (OCSF_DATE, PARSED_SOURCE_FILE, "_line_number", "_record_index")
_CLASS = "_ocsf_class"
_ACTIVITY = "_ocsf_activity"


@dataclass(frozen=True)
class Route:
    """The class and activity an event type becomes.

    :param ocsf_class: the class's name (:data:`~spark_jobs.model.ocsf.OCSF_CLASSES`).
    :param activity_id: its ``activity_id``; ``None``: the class's fields give ``activity_id``.
    """

    ocsf_class: str
    activity_id: int | None = None


class Reads:
    """The source columns a class's fields read: ``reads("src_ip")`` is the column, and is recorded (mapped: not
    copied to ``unmapped``); ``reads.peek("x")`` is a column only part of which a field uses (it stays in
    ``unmapped`` too)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def __call__(self, name: str) -> Column:
        self.names.add(name)
        return F.col(name)

    @staticmethod
    def peek(name: str) -> Column:
        return F.col(name)


@dataclass(frozen=True)
class OcsfMapping:
    """One raw table's OCSF mapping (see the module docstring).

    :param log_type: the raw log type (``cowrie``): its table is ``<log type>_events``.
    :param key: the raw table's key column (with ``date``): ``metadata.uid`` and ``raw_data``'s reference.
    :param kind: the column whose value picks the route.
    :param routes: the route of each value of ``kind``.
    :param default: the route of any other value; ``None``: quarantined (``no_ocsf_class``).
    :param product: ``metadata.product``'s name and vendor.
    :param time: the raw table's event-time column (a TIMESTAMP): ``time``, in milliseconds.
    :param fields: per class, its attribute values of a row (paths to Columns), read through a :class:`Reads`.
    :param profiles: the OCSF profiles its rows apply (``metadata.profiles``).
    """

    log_type: str
    key: str
    kind: str
    routes: Mapping[str, Route]
    product: tuple[str, str]
    fields: Mapping[str, Callable[[Reads], dict[str, Column]]]
    default: Route | None = None
    time: str = "timestamp"
    profiles: tuple[str, ...] = ()
    classes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        routed = {r.ocsf_class for r in (*self.routes.values(), *([self.default] if self.default else []))}
        unknown = sorted((routed | set(self.fields)) - set(OCSF_CLASSES))
        if unknown or routed != set(self.fields):
            raise ValueError(f"OCSF mapping of {self.log_type}: routes {sorted(routed)} and fields "
                             f"{sorted(self.fields)} must name the same classes of OCSF_CLASSES"
                             + (f" ({unknown[0]!r} is none)" if unknown else ""))
        object.__setattr__(self, "classes", tuple(c for c in OCSF_CLASSES if c in routed))

    @property
    def source_table(self) -> str:
        return f"{self.log_type}_events"


def _lookup(mapping: Mapping, column: Column, default=None) -> Column:
    """``mapping[column]`` as a Column (``default`` for any other value)."""
    result = F.lit(default)
    for value, found in mapping.items():
        result = F.when(column == F.lit(value), F.lit(found)).otherwise(result)
    return result


def _as_text(column: Column, kind: T.DataType) -> Column:
    if isinstance(kind, T.StringType):
        return column
    if isinstance(kind, T.TimestampType):
        return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
    if isinstance(kind, (T.StructType, T.ArrayType, T.MapType)):
        return F.to_json(column)
    return column.cast("string")


def unmapped(source: T.StructType, read: set[str]) -> Column:
    """The source columns not in ``read`` (nor :data:`LAKE_COLUMNS`) that hold a value, by name, as text; NULL when
    none does."""
    left = [f for f in source.fields if f.name not in read and f.name not in LAKE_COLUMNS]
    if not left:
        return F.lit(None).cast("map<string,string>")
    pairs = F.map_filter(F.map_from_arrays(F.array(*[F.lit(f.name) for f in left]),
                                           F.array(*[_as_text(F.col(f.name), f.dataType) for f in left])),
                         lambda _, value: value.isNotNull())
    return F.when(F.size(pairs) > 0, pairs)


def _common(mapping: OcsfMapping, name: str, activity: Column) -> dict[str, Column]:
    """The attributes every row of class ``name`` has, whatever its source."""
    schema = ocsf_schema()
    uid = schema.class_uid(name)
    activities = schema.enum(name, "activity_id")
    severity_names = schema.enum("base_event", "severity_id")
    reference = F.to_json(F.struct(F.lit(mapping.source_table).alias("table"),
                                   F.col(OCSF_DATE).cast("string").alias(OCSF_DATE), F.col(mapping.key)))
    return {
        "class_uid": F.lit(uid), "class_name": F.lit(schema.caption(name)),
        "category_uid": F.lit(uid // 1000), "category_name": F.lit(schema.category_caption(name)),
        "activity_id": activity, "activity_name": _lookup(activities, activity),
        "type_uid": F.lit(uid * 100) + activity,
        "type_name": F.concat(F.lit(f"{schema.caption(name)}: "), _lookup(activities, activity, "Unknown")),
        "time": F.unix_millis(F.col(mapping.time)),
        "severity_id": F.lit(1), "severity": F.lit(severity_names[1]),
        "raw_data": reference,
        "metadata.version": F.lit(OCSF_VERSION), "metadata.uid": F.col(mapping.key),
        "metadata.log_name": F.lit(mapping.source_table),
        "metadata.product.name": F.lit(mapping.product[0]), "metadata.product.vendor_name": F.lit(mapping.product[1]),
        "metadata.profiles": F.array(*[F.lit(p) for p in mapping.profiles]) if mapping.profiles else None,
    }


def _class_row(mapping: OcsfMapping, name: str, source: T.StructType) -> Column:
    reads = Reads()
    reads(mapping.key)
    reads(mapping.time)
    given = mapping.fields[name](reads)
    activity = given.pop("activity_id", None)
    activity = F.col(_ACTIVITY) if activity is None else F.coalesce(activity.cast("int"), F.col(_ACTIVITY))
    values = {k: v for k, v in _common(mapping, name, activity).items() if v is not None} | given
    for attribute in ("status", "severity"):  # the caption of the id a class's fields gave
        if f"{attribute}_id" in given and attribute not in given:
            values[attribute] = _lookup(ocsf_schema().enum("base_event", f"{attribute}_id"), given[f"{attribute}_id"])
    values["unmapped"] = unmapped(source, reads.names)
    return ocsf_row(name, values)


def transform(mapping: OcsfMapping, rows: DataFrame) -> DataFrame:
    """Each raw row's OCSF row (one struct column per class of the mapping), its ``class_uid``, and its
    ``reason`` and ``detail`` when OCSF cannot express it (see the module docstring)."""
    for stage in _stages(mapping, rows.schema):
        rows = rows.select(*stage)
    return rows


# The stages' Columns, by SparkContext, mapping and source schema: making them costs ~20,000 calls into the JVM (seconds
# for every micro-batch if they were made anew); unresolved Columns serve any number of plans.
_STAGES: dict = {}


def _stages(mapping: OcsfMapping, source: T.StructType) -> list[list]:
    from pyspark import SparkContext

    key = (id(SparkContext._active_spark_context), mapping.log_type, source.json())
    if key not in _STAGES:
        if len(_STAGES) >= 8:  # a few mappings and source schemas of one session; a new session's replace them
            _STAGES.clear()
        _STAGES[key] = _build_stages(mapping, source)
    return _STAGES[key]


def _build_stages(mapping: OcsfMapping, source: T.StructType) -> list[list]:
    """The selects of :func:`transform`: the class and activity of each row; its class's row (built once, then read
    by what follows); what that row lacks; the result's columns."""
    kind = F.col(mapping.kind)
    default = mapping.default
    schema = ocsf_schema()
    routed = [
        "*",
        _lookup({k: r.ocsf_class for k, r in mapping.routes.items()}, kind, default and default.ocsf_class)
        .alias(_CLASS),
        _lookup({k: r.activity_id for k, r in mapping.routes.items() if r.activity_id is not None}, kind,
                default.activity_id if default else None).cast("int").alias(_ACTIVITY),
    ]
    rows = ["*", *[F.when(F.col(_CLASS) == name, _class_row(mapping, name, source)).alias(f"_ocsf_{name}")
                   for name in mapping.classes]]
    missing = [F.when(F.col(_CLASS) == name, missing_required(name, F.col(f"_ocsf_{name}")))
               for name in mapping.classes]
    lacking = ["*", F.coalesce(*missing, F.array().cast("array<string>")).alias("_lacking")]
    reason = (F.when(F.col(_CLASS).isNull(), F.lit(NO_CLASS))
              .when(F.size(F.col("_lacking")) > 0, F.lit(MISSING_REQUIRED)))
    detail = (F.when(F.col(_CLASS).isNull(), F.concat(F.lit(f"no OCSF class for {mapping.kind} "),
                                                       F.coalesce(kind.cast("string"), F.lit("NULL"))))
              .when(F.size(F.col("_lacking")) > 0, F.concat(F.lit("missing "), F.array_join(F.col("_lacking"), ", "))))
    result = [
        *[f"_ocsf_{name}" for name in mapping.classes],
        _lookup({name: schema.class_uid(name) for name in mapping.classes}, F.col(_CLASS)).cast("int")
        .alias("class_uid"),
        F.col(OCSF_DATE),
        F.col(mapping.key).cast("string").alias("source_key"),
        kind.cast("string").alias("kind"),
        reason.alias(REASON),
        detail.alias("detail"),
        F.when(reason.isNotNull(), F.to_json(F.struct(*[F.col(f.name) for f in source.fields]))).alias("raw"),
    ]
    return [routed, rows, lacking, result]


def outputs(mapping: OcsfMapping) -> dict[str, Callable[..., DataFrame]]:
    """The job's selects, by table name: each class's table takes its struct's attributes and ``date``; the
    quarantine the source key and date, the reason, the kind and the row as JSON (cut at MAX_RAW_CHARS)."""
    def class_select(name: str):
        def select(result: DataFrame, context=None) -> DataFrame:
            return result.select(f"_ocsf_{name}.*", OCSF_DATE)
        return select

    def quarantine(result: DataFrame, context=None) -> DataFrame:
        raw = F.coalesce(F.col("raw"), F.lit(""))
        quarantined_at = F.current_timestamp()
        return result.select(
            F.lit(mapping.source_table).alias("source_table"), "source_key", F.col(OCSF_DATE).alias("event_date"),
            REASON, "detail", F.col("kind").alias(mapping.kind),
            F.left(raw, F.lit(MAX_RAW_CHARS)).alias("raw"), (F.length(raw) > MAX_RAW_CHARS).alias("raw_truncated"),
            F.length(raw).alias("raw_length"), quarantined_at.alias("quarantined_at"),
            F.to_date(quarantined_at).alias(INGEST_DATE))

    selects = {OCSF_CLASSES[name].table_name: class_select(name) for name in mapping.classes}
    selects[f"{mapping.log_type}_ocsf_quarantine"] = quarantine
    return selects


def job_transform(mapping: OcsfMapping) -> Callable[[DataFrame, JobSpec], DataFrame]:
    """The job module's ``transform`` of a mapping."""
    def mapped(rows: DataFrame, job: JobSpec | None = None) -> DataFrame:
        return transform(mapping, rows)
    mapped.__doc__ = f"{mapping.source_table} rows to OCSF rows (:func:`spark_jobs.transforms.ocsf.mapping.transform`)."
    return mapped

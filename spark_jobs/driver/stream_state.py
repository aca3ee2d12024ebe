"""A job's streaming state, read with Spark's ``state-metadata`` and ``statestore`` data sources.

Usage::

    python -m spark_jobs state cloudtrail_activity            # operators, state variables, rows
    python -m spark_jobs state cloudtrail_alerts --show 5     # and 5 rows of each
    python -m spark_jobs state word_count --json

The same in PySpark (the data sources are Spark's; they read a checkpoint, also while its query runs)::

    spark.read.format("state-metadata").load("<lake>/checkpoints/cloudtrail_activity")
    spark.read.format("statestore").load("<lake>/checkpoints/cloudtrail_activity")  # operator 0
    spark.read.format("statestore").option("stateVarName", "windows").load("<lake>/checkpoints/cloudtrail_alerts")
    spark.read.format("statestore").option("readRegisteredTimers", "true").load(".../cloudtrail_alerts")

Each operator's rows are read at the checkpoint's last committed batch. For ``transformWithState``
operators every state variable (``operatorProperties.stateVariables``) is read on its own, and the
registered timers with ``readRegisteredTimers``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


TIMER_PREFIX = "$"  # Spark's internal state variables (timers) start with it


@dataclass
class StateVariable:
    """Rows of one operator's state (or of one of its state variables).

    :param operator_id: the stateful operator.
    :param operator: its name (``stateStoreSave``, ``transformWithStateInPandasExec``, ...).
    :param variable: the state variable (``None`` for an aggregation's one store; ``timers``).
    :param kind: ``ValueState``, ``MapState``, ``ListState``, ``timers`` or ``store``.
    :param ttl: whether the variable has a TTL.
    :param rows: its rows at the last committed batch.
    :param sample: some of them, as dicts (``--show``).
    """

    operator_id: int
    operator: str
    variable: str | None
    kind: str
    ttl: bool
    rows: int
    sample: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def operators(spark, checkpoint: str) -> list[dict]:
    """The checkpoint's stateful operators (``state-metadata``), as dicts; [] for a stateless query."""
    spark.streams.active  # noqa: B018 - makes the session's state store coordinator, which the readers report to
    try:
        rows = spark.read.format("state-metadata").load(checkpoint).collect()
    except Exception as exc:  # noqa: BLE001 - no state folder: a stateless query, or nothing run yet
        if "STATE" in str(exc).upper() and ("NOT" in str(exc).upper() or "EXIST" in str(exc).upper()):
            return []
        raise
    return [row.asDict() for row in rows]


def read_state(spark, checkpoint: str, show: int = 0) -> list[StateVariable]:
    """Every state variable of every stateful operator of ``checkpoint``, with its row count."""
    found = []
    for operator in operators(spark, checkpoint):
        op_id, name = int(operator["operatorId"]), operator["operatorName"]
        properties = json.loads(operator.get("operatorProperties") or "{}")
        variables = properties.get("stateVariables")
        def reader(**options):  # a new reader each time: a reader keeps every option set on it
            return spark.read.format("statestore").options(operatorId=op_id, **options)

        if not variables:
            found.append(_count(reader().load(checkpoint), op_id, name, None, "store", False, show))
            continue
        for variable in variables:
            var = variable["stateName"]
            if var.startswith(TIMER_PREFIX):
                frame = reader(readRegisteredTimers="true").load(checkpoint)
                found.append(_count(frame, op_id, name, "timers", "timers", False, show))
                continue
            frame = reader(stateVarName=var).load(checkpoint)
            found.append(_count(frame, op_id, name, var, variable.get("stateVariableType", "?"),
                                bool(variable.get("ttlEnabled")), show))
    return found


def _count(frame, op_id: int, name: str, variable: str | None, kind: str, ttl: bool, show: int) -> StateVariable:
    sample = [row.asDict(recursive=True) for row in frame.limit(show).collect()] if show else []
    return StateVariable(op_id, name, variable, kind, ttl, frame.count(), sample)



"""Which rows and columns each table gets from a job's transform: routes and selects.

A stateless job's transform gives one result for all its tables; each table's ``route`` (the
registry's SQL condition) picks its rows and the job module's select (``OUTPUTS[table]``) its columns.
A table that declares a ``schema`` gets its rows conformed to it (:mod:`spark_jobs.transforms.conform`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.model.tables import TableSpec
from spark_jobs.driver.write.delta_writer import TableTarget

if TYPE_CHECKING:
    from spark_jobs.driver.job_contract import BatchContext
    from spark_jobs.driver.job_contract import JobModule


def route_column(targets: list[TableTarget]) -> Column:
    """The name of the table each row of a stateless transform's result goes to (NULL: none), from the
    targets' routes; a single table without a route takes every row."""
    if len(targets) == 1 and targets[0].route is None:
        return F.lit(targets[0].name)
    cases = " ".join(f"WHEN ({t.route}) THEN '{t.name}'" for t in targets if t.route is not None)
    return F.expr(f"CASE {cases} END")


def table_rows(module: "JobModule", target: TableTarget | TableSpec, result: DataFrame,
               context: "BatchContext | None" = None) -> DataFrame:
    """``target``'s rows of the job's transform ``result``: those its route takes, through its select
    (``OUTPUTS[table](rows, context)``; ``context`` is ``None`` for a stateless job)."""
    rows = result.where(F.expr(target.route)) if target.route is not None else result
    return module.OUTPUTS[target.name](rows, context)

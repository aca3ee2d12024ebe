"""Modes of one run measured side by side: a warm-up of each, then repetitions that alternate the modes' order,
and a summary per mode with the ratio of their medians.

A cost that is a few percent of a run (a recorder, a scrape, a listener) hides in the drift of a machine shared
over minutes; alternating the order within each repetition and taking medians keeps that drift out of the ratio.
Used by :mod:`tools.bench.progress_cost`, :mod:`tools.bench.exporter_cost` and :mod:`tools.bench.lineage_cost`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
from collections.abc import Callable, Hashable, Iterable
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("tools.bench")


def alternate(run: Callable[[Hashable], dict], repeat: int, name: str,
              modes: tuple[Hashable, ...] = (True, False)) -> list[dict]:
    """``run(mode)`` once for each of ``modes`` as a warm-up (not returned), then ``repeat`` repetitions of all,
    in the order of ``modes`` in the even ones and reversed in the odd ones; each result gets ``"mode"`` set.
    ``name`` says what the modes switch (for the log)."""
    for mode in modes:
        log.info("warm-up run, %s %s", name, mode)
        run(mode)
    runs = []
    for index in range(repeat):
        for mode in (modes if index % 2 == 0 else tuple(reversed(modes))):
            log.info("repetition %d of %d, %s %s", index + 1, repeat, name, mode)
            runs.append({**run(mode), "mode": mode})
    return runs


def summary(runs: list[dict], mode: Hashable, lists: Iterable[str] = ()) -> dict:
    """One mode's runs: their wall times (``seconds``) and median, the median of their median micro-batch
    durations (``median_batch_ms``), the batches of the first, and each key of ``lists`` as a list over the runs."""
    mine = [r for r in runs if r["mode"] == mode]
    return {"runs_s": [r["seconds"] for r in mine], "median_s": statistics.median(r["seconds"] for r in mine),
            "median_batch_ms": statistics.median(r["median_batch_ms"] for r in mine),
            "batch_ms_medians": [r["median_batch_ms"] for r in mine], "batches": mine[0]["batches"],
            **{key: [r[key] for r in mine] for key in lists}}


def ratios(on: dict, off: dict) -> dict:
    """One mode's medians (``on``) over another's (``off``): the run's wall time and the micro-batch's duration."""
    return {"ratio_median_s": round(on["median_s"] / off["median_s"], 3),
            "ratio_median_batch_ms": round(on["median_batch_ms"] / off["median_batch_ms"], 3)}


def report_header() -> dict:
    """When and where: the fields every side-by-side report opens with."""
    return {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node()}


def write(report: dict, out: Path, load_before: tuple[float, float, float]) -> None:
    """``report`` with the one-minute load average at the start (``load_before``) and now, printed and written
    to ``out``."""
    report["load_average_at_start_and_end"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    text = json.dumps(report, indent=1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(text)

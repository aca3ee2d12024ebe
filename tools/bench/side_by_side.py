"""Two modes of one run measured side by side: a warm-up of each, then repetitions that alternate which mode
goes first, and a summary per mode with the ratio of their medians.

A cost that is a few percent of a run (a recorder, a scrape, a listener) hides in the drift of a machine shared
over minutes; alternating the order within each repetition and taking medians keeps that drift out of the ratio.
Used by :mod:`tools.bench.progress_cost` and :mod:`tools.bench.exporter_cost`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("tools.bench")


def alternate(run: Callable[[bool], dict], repeat: int, name: str) -> list[dict]:
    """``run(True)`` and ``run(False)`` once each as a warm-up (not returned), then ``repeat`` repetitions of both,
    ``True`` first in the even ones; each result gets ``"on"`` set to its mode. ``name`` says what the mode is."""
    for on in (True, False):
        log.info("warm-up run, %s %s", name, "on" if on else "off")
        run(on)
    runs = []
    for index in range(repeat):
        for on in ((True, False) if index % 2 == 0 else (False, True)):
            log.info("repetition %d of %d, %s %s", index + 1, repeat, name, "on" if on else "off")
            runs.append({**run(on), "on": on})
    return runs


def summary(runs: list[dict], on: bool, lists: Iterable[str] = ()) -> dict:
    """One mode's runs: their wall times (``seconds``) and median, the median of their median micro-batch
    durations (``median_batch_ms``), the batches of the first, and each key of ``lists`` as a list over the runs."""
    mine = [r for r in runs if r["on"] is on]
    return {"runs_s": [r["seconds"] for r in mine], "median_s": statistics.median(r["seconds"] for r in mine),
            "median_batch_ms": statistics.median(r["median_batch_ms"] for r in mine),
            "batch_ms_medians": [r["median_batch_ms"] for r in mine], "batches": mine[0]["batches"],
            **{key: [r[key] for r in mine] for key in lists}}


def ratios(on: dict, off: dict) -> dict:
    """The on mode's medians over the off mode's: the run's wall time and the micro-batch's duration."""
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

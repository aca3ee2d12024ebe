"""docs/benchmarks.md opens with one current table readable at a glance: one figure a cell, and every report it
names exists (the history of each figure lives in the diary below it)."""

from __future__ import annotations

import re

from tests.helpers.project import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "benchmarks.md"
# One figure: a number with its unit, a ratio, a duration, "N of M", "N run(s)".
FIGURE = re.compile(r"^\+?[\d,]+(\.\d+)?( ?(x|s|min|records/s))?( \d+ s)?$|^\d+ of \d+$|^\d+ runs?$")


def current_table() -> list[dict]:
    text = DOC.read_text()
    start = text.index("| goal |", text.index("## Where every goal stands"))
    lines = text[start:text.index("\n\n", start)].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
    return [dict(zip(header, (cell.strip() for cell in line.strip().strip("|").split(" | ")))) for line in lines[2:]]


def test_the_current_table_has_one_figure_a_cell_and_its_reports_exist():
    rows = current_table()
    assert len(rows) >= 30
    assert [r["goal"] for r in rows if not FIGURE.match(r["figure"])] == []
    reports = PROJECT_ROOT / "docs" / "benchmarks" / "reports"
    named = {name for r in rows for name in re.findall(r"`([\w.-]+\.json)`", r["report"])}
    assert named and [name for name in sorted(named) if not (reports / name).is_file()] == []

"""tests/cpu_report.py: the per-test CPU lines it writes, and its per-module summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cpu_report import summarize

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def test_the_summary_adds_each_modules_parts_and_ranks_the_costliest_first(tmp_path):
    report = tmp_path / "cpu.jsonl"
    rows = [("tests/a.py::t1", 1.0, 10.0, 0.0, 12.0), ("tests/a.py::t2", 0.4, 0.0, 4.0, 5.0),
            ("tests/b.py::t1", 20.0, 0.0, 0.0, 21.0)]
    report.write_text("".join(json.dumps({"test": t, "worker": "gw0", "self_s": s, "children_s": c,
                                          "session_jvm_s": j, "wall_s": w}) + "\n" for t, s, c, j, w in rows))
    lines = summarize(report).splitlines()
    assert lines[1].split() == ["20", "20", "0", "0", "21", "1", "tests/b.py"]
    assert lines[2].split() == ["15", "1", "10", "4", "17", "2", "tests/a.py"]
    assert lines[3].split()[:6] == ["35", "21", "10", "4", "38", "3"]


def test_a_run_with_the_option_writes_one_line_per_test_with_the_cpu_of_the_children_it_waited_for(tmp_path):
    (tmp_path / "test_busy.py").write_text(
        "import subprocess, sys\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(30_000_000))'], check=True)\n"
        "def test_idle():\n"
        "    pass\n")
    report = tmp_path / "cpu.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.cpu_report",
                           f"--cpu-report={report}", str(tmp_path / "test_busy.py")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [line["test"].split("::")[1] for line in lines] == ["test_child", "test_idle"]
    assert lines[0]["children_s"] > 0.2 and lines[1]["children_s"] == 0
    assert all(line["session_jvm_s"] == 0 for line in lines)

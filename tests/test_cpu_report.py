"""tests/helpers/cpu_report.py: the CPU it charges to each test, and its per-module summary."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers.cpu_report import summarize
from tests.helpers.project import PROJECT_ROOT


def test_the_summary_adds_each_modules_parts_and_ranks_the_costliest_first(tmp_path):
    report = tmp_path / "cpu.jsonl"
    rows = [{"test": "tests/a.py::t1", "self_s": 1.0, "session_jvm_s": 0.0, "wall_s": 12.0},
            {"test": "tests/a.py::t2", "self_s": 0.4, "session_jvm_s": 4.0, "wall_s": 5.0},
            {"test": "tests/b.py::t1", "self_s": 20.0, "session_jvm_s": 0.0, "wall_s": 21.0},
            {"test": "tests/a.py::t1", "processes_s": 10.0, "processes": 3}]
    report.write_text("".join(json.dumps({**row, "worker": "gw0"}) + "\n" for row in rows))
    lines = summarize(report).splitlines()
    assert lines[1].split() == ["20", "20", "0", "0", "21", "1", "0", "tests/b.py"]
    assert lines[2].split() == ["15", "1", "4", "10", "17", "2", "3", "tests/a.py"]
    assert lines[3].split()[:7] == ["35", "21", "4", "10", "38", "3", "3"]


def test_a_run_charges_each_test_the_processes_it_started_even_unwaited(tmp_path):
    busy = tmp_path / "busy.py"  # 1.5 CPU-seconds, then it leaves the file named by its argument
    busy.write_text("import sys, time\nend = time.process_time() + 1.5\nwhile time.process_time() < end:\n    pass\n"
                    "open(sys.argv[1], 'w').close()\n")
    (tmp_path / "test_busy.py").write_text(
        "import os, subprocess, sys, time\n"
        f"BUSY, DONE = {str(busy)!r}, {str(tmp_path / 'done')!r}\n"
        "def test_waits_for_a_child():\n"
        "    subprocess.run([sys.executable, BUSY, DONE + '1'], check=True)\n"
        "def test_leaves_a_grandchild_to_init():\n"  # the child exits at once; its own child runs on, unwaited
        "    code = f'import subprocess, sys; subprocess.Popen([sys.executable, {BUSY!r}, {DONE!r} + \"2\"])'\n"
        "    subprocess.run([sys.executable, '-c', code], check=True)\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not os.path.exists(DONE + '2') and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "def test_idle():\n"
        "    pass\n")
    report = tmp_path / "cpu.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.helpers.cpu_report",
                           f"--cpu-report={report}", str(tmp_path / "test_busy.py")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    names = [row["test"].split("::")[1] for row in rows if "wall_s" in row]
    assert names == ["test_waits_for_a_child", "test_leaves_a_grandchild_to_init", "test_idle"]
    charged = {row["test"].split("::")[1]: row["processes_s"] for row in rows if "processes_s" in row}
    assert set(charged) == {"test_waits_for_a_child", "test_leaves_a_grandchild_to_init"}
    # each used 1.5 s; the looks come every 0.5 s, so up to that much of a process's end is not seen
    assert all(0.8 <= seconds <= 1.6 for seconds in charged.values()), charged


def test_a_look_while_pyspark_is_half_imported_finds_no_session_jvm(monkeypatch):
    """The looking thread may run while a test's thread is inside ``import pyspark`` (the module is in
    ``sys.modules`` without its ``SparkContext`` yet): it finds no JVM instead of dying."""
    import types

    from tests.helpers.cpu_report import session_jvm_pid

    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    assert session_jvm_pid() is None

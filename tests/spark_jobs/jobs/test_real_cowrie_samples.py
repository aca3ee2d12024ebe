"""cowrie_honeypot on the real Cowrie honeypot log in ../shared (2 files, one gzipped: 4,148 non-blank lines).

Every line is an event, each with its own event_id (sensor, session, eventid, timestamp): a rerun, the
files landing again under new names and a damaged copy add no event twice; a driver killed with
SIGKILL in the middle of a micro-batch, then restarted, leaves the tables an uninterrupted run leaves.
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.transforms.cowrie.parse import FIELDS
from tests.helpers.project import PROJECT_ROOT
from tests.helpers.cowrie import EVENTS, QUARANTINE, JOB, read_tables, run
from tests.helpers.kills import JobDriver, kill_mid_batch, kill_with_files_uncommitted, run_command
from tests.helpers.processes import batch_ids

pytestmark = pytest.mark.real_data
REAL_COWRIE = PROJECT_ROOT.parent / "shared" / "data" / "real" / "applogs" / "kareiva_cowrie-logs"
PLAIN, GZIPPED = "cowrie.json.2018-05-19", "cowrie.json.2018-07-01.gz"
SHAPES = {"cowrie.session.connect": 929, "cowrie.session.closed": 929, "cowrie.client.version": 895,
          "cowrie.login.failed": 538, "cowrie.direct-tcpip.request": 247, "cowrie.direct-tcpip.data": 247,
          "cowrie.command.input": 93, "cowrie.login.success": 91, "cowrie.log.open": 84, "cowrie.log.closed": 83,
          "cowrie.command.failed": 8, "cowrie.session.file_download": 2, "cowrie.session.file_download.failed": 1,
          "cowrie.client.size": 1}


@pytest.fixture(scope="module")
def real_cowrie() -> Path:
    if not REAL_COWRIE.is_dir():
        pytest.skip(f"the real Cowrie log is not at {REAL_COWRIE} (it sits beside the project in ../shared/data/real)")
    return REAL_COWRIE


def source_lines(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) of every non-blank line, read by Python's json (the test's own reader)."""
    data = path.read_bytes()
    text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    return [(n, json.loads(line)) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


@pytest.fixture(scope="module")
def ingested(real_cowrie, tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("cowrie")
    landing, lake = root / "landing", root / "lake"
    shutil.copytree(real_cowrie, landing)  # files land again in it below
    summary = run(landing, lake)
    frames = read_tables(spark, lake)
    return {"summary": summary, "landing": landing, "lake": lake, "events": frames[EVENTS].collect(),
            "quarantine": frames[QUARANTINE].collect()}


def test_every_real_line_is_one_event(ingested):
    lines = {name: source_lines(ingested["landing"] / name) for name in (PLAIN, GZIPPED)}
    assert {name: len(found) for name, found in lines.items()} == {PLAIN: 2004, GZIPPED: 2144}
    events = ingested["events"]
    assert ingested["summary"].rows == {EVENTS: 4148, QUARANTINE: 0}
    assert len(events) == len({r.event_id for r in events}) == 4148 and ingested["quarantine"] == []
    assert Counter(r.eventid for r in events) == SHAPES
    assert Counter(str(r.date) for r in events) == {"2018-05-19": 2004, "2018-07-01": 2144}
    rows = {(Path(r._source_file).name, r._line_number): r for r in events}
    for name, found in lines.items():
        for number, record in found:
            row = rows.pop((name, number))
            assert row.timestamp.isoformat(timespec="microseconds") + "Z" == record["timestamp"]
            typed = {field: getattr(row, field) for field in FIELDS if field in record}
            assert typed == {field: record[field] for field in typed}, (name, number)  # 0/1 == False/True too
            assert set(record) - set(FIELDS) == {"timestamp"} and row._rescued_data is None
    assert rows == {}


def test_a_rerun_adds_nothing(ingested, spark):
    again = run(ingested["landing"], ingested["lake"])
    assert (again.input_files, again.rows) == (0, {EVENTS: 0, QUARANTINE: 0})
    assert read_tables(spark, ingested["lake"])[EVENTS].count() == 4148


def test_the_files_landing_again_under_new_names_add_nothing(ingested, spark):
    landing = ingested["landing"]
    (landing / "again").mkdir()
    for name in (PLAIN, GZIPPED):
        shutil.copyfile(landing / name, landing / "again" / f"sensor-b.{name}")
    summary = run(landing, ingested["lake"])
    assert (summary.input_files, summary.rows) == (2, {EVENTS: 0, QUARANTINE: 0})
    assert read_tables(spark, ingested["lake"])[EVENTS].count() == 4148


def test_a_cut_gzip_copy_adds_only_its_damage_to_quarantine(ingested, spark):
    landing = ingested["landing"]
    data = (landing / GZIPPED).read_bytes()
    cut = data[:len(data) // 2]
    inflater = zlib.decompressobj(wbits=31)
    readable = inflater.decompress(cut) + inflater.flush()
    whole_lines = readable.count(b"\n")
    assert 0 < whole_lines < 2144
    (landing / "cut").mkdir()
    (landing / "cut" / f"cut.{GZIPPED}").write_bytes(cut)
    summary = run(landing, ingested["lake"])
    assert summary.rows == {EVENTS: 0, QUARANTINE: 1}  # every whole line is an event it holds already
    [row] = read_tables(spark, ingested["lake"])[QUARANTINE].collect()
    assert (Path(row.source_file).name, row.line_number, row.reason) == (f"cut.{GZIPPED}", whole_lines + 1,
                                                                          "unreadable_file")
    assert row.raw.encode() == readable.rsplit(b"\n", 1)[1]


def _landing_in_chunks(real: Path, landing: Path, lines_per_file: int = 600) -> int:
    """The real lines in files of ``lines_per_file`` (every other one gzipped), and 3 bad lines in one more."""
    landing.mkdir(parents=True)
    files = 0
    for name in (PLAIN, GZIPPED):
        data = (real / name).read_bytes()
        text = gzip.decompress(data) if name.endswith(".gz") else data
        lines = [line for line in text.split(b"\n") if line.strip()]
        for start in range(0, len(lines), lines_per_file):
            chunk = b"\n".join(lines[start:start + lines_per_file]) + b"\n"
            target = landing / f"part{files:02d}.{name.removesuffix('.gz')}"
            if files % 2:
                target, chunk = target.with_name(target.name + ".gz"), gzip.compress(chunk)
            target.write_bytes(chunk)
            files += 1
    bad = b'{"eventid": "cowrie.x"}\n[1]\n{"timestamp": "2018-07-02T00:00:00Z"}\n'
    (landing / "zbad.json.2018-07-02").write_bytes(bad)
    return files + 1


def _rows(frames: dict) -> dict:
    drop = {QUARANTINE: ("quarantined_at", "ingest_date")}
    return {name: sorted(tuple(r) for r in frame.drop(*drop.get(name, ())).collect()) for name, frame in frames.items()}


def test_kill_9_mid_batch_then_restart_gives_the_uninterrupted_runs_tables(real_cowrie, tmp_path, spark):
    landing = tmp_path / "landing"
    assert _landing_in_chunks(real_cowrie, landing) == 9
    reference = tmp_path / "reference"  # uninterrupted, in one batch (no line is in two files: the same rows)
    assert run(landing, reference, maxFilesPerTrigger="9").rows == {EVENTS: 4148, QUARANTINE: 3}

    lake = tmp_path / "lake"
    checkpoint, events = lake / "checkpoints" / JOB.name, lake / "tables" / EVENTS
    command = run_command(JOB.name, "--input", str(landing), "--lake", str(lake), "--max-files-per-trigger", "1")

    # The first kill waits until the batch in flight has written event files it has not committed.
    with JobDriver(command, tmp_path / "kill-2.log") as driver:
        kills = [kill_with_files_uncommitted(driver, checkpoint, events, 2)]
    with JobDriver(command, tmp_path / "kill-4.log") as driver:
        kills.append(kill_mid_batch(driver, checkpoint, 4, 0.5))
    assert all(k.in_flight == k.committed + 1 for k in kills)  # each hit a planned, uncommitted batch

    # The restart, in this process's SparkSession (a third JVM start would add nothing to what is proven).
    final = run(landing, lake, maxFilesPerTrigger="1")
    assert final.skipped is None and final.batches >= 1, final
    assert batch_ids(checkpoint / "offsets") == batch_ids(checkpoint / "commits") == set(range(9))
    got, expected = _rows(read_tables(spark, lake)), _rows(read_tables(spark, reference))
    assert {name: len(rows) for name, rows in got.items()} == {EVENTS: 4148, QUARANTINE: 3}
    assert got == expected

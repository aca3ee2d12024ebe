"""The history_scale benchmark's pure parts (tools/bench/history_landing.py, history_state.py): its landings are
CloudTrail's layout as the job's key layout reads it, and the state it writes as "already ingested" is what the
planner itself leaves after ingesting the same files, with Spark's log files in Spark's format. No Spark."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

from spark_jobs.control.checkpoint.logs import parse_commit, parse_offsets, verify_crc
from spark_jobs.control.checkpoint.store import Location
from spark_jobs.control.discovery.planner import Discovery, offset
from spark_jobs.control.discovery.settings import discovery_settings
from spark_jobs.control.discovery.state import DiscoveryLog
from tools.bench.history_landing import BODY, END, REGIONS, History, build_local
from tools.bench.history_state import JOB, OFFSETS_CONF, REPLAYED, write_ingested_state

LAYOUT = JOB.source.layout
FILES = REPLAYED + 80  # a hand-made window after 80 deliveries (6 h 40 min), then the planner's own replay
LOOKBACK = "2 hours"  # shorter than those 80 deliveries: the hand-made window leaves files behind its cut


def test_history_keys_are_cloudtrails_layout_one_delivery_every_five_minutes(tmp_path):
    keys = list(History(8).keys())
    assert [LAYOUT.delivery_time(k) for k in keys] == [END - dt.timedelta(minutes=5 * age) for age in range(7, -1, -1)]
    assert [LAYOUT.stem(k).rsplit("/", 1)[-1] for k in keys[-4:]] == list(reversed(REGIONS))
    assert keys[-1].startswith(f"AWSLogs/111122223333/CloudTrail/{REGIONS[0]}/2026/11/01/111122223333_CloudTrail_")
    assert LAYOUT.delivery_time(History.new_key()) == END + dt.timedelta(minutes=5)
    built = build_local(tmp_path / "h", 8)
    assert sorted(str(p.relative_to(built["landing"])) for p in Path(built["landing"]).rglob("*.gz")) == sorted(keys)
    assert (built["reused"], build_local(tmp_path / "h", 8)["reused"]) == (False, True)


def _planner_from_scratch(landing: Path, lake: Path) -> Path:
    """Ingest the landing with the real planner and store, one delivery per manifest, each committed."""
    checkpoint = lake / "checkpoints" / JOB.name
    settings = replace(discovery_settings(JOB, str(landing), str(checkpoint), dict(JOB.file_source_options),
                                          lookback=LOOKBACK), max_files=1)
    found, start = Discovery(settings, clock=lambda: END), offset(0)
    while (end := found.latest(start, 1)) != start:
        found.committed(end)
        start = end
    return checkpoint


def _contents(checkpoint: Path) -> dict[str, dict]:
    """Every discovery file but the last poll's status, without what differs run to run (a listing's seconds and
    the files' modification times)."""
    out = {}
    for path in sorted((checkpoint / "discovery").rglob("*.json")):
        value = json.loads(path.read_text())
        if path.name == "status.json":
            continue
        if "files" in value:
            value["listing"].pop("seconds")
            value["files"] = [row[:2] + row[3:] for row in value["files"]]
        out[str(path.relative_to(checkpoint))] = value
    return out


def test_the_ingested_state_is_what_the_planner_leaves_after_the_same_files(tmp_path):
    landing = Path(build_local(tmp_path / "history", FILES)["landing"])
    real = _planner_from_scratch(landing, tmp_path / "real")
    state = write_ingested_state(tmp_path / "synthetic", str(landing), list(History(FILES).keys()), size=len(BODY),
                                 mtime_ms=0, lookback=LOOKBACK, now=END)
    assert (state.manifest, state.admitted) == (FILES, FILES)
    assert _contents(state.checkpoint) == _contents(real)
    assert len(_contents(real)) == 111  # the planner's retention: 100 manifests, 11 snapshots
    ours, theirs = (DiscoveryLog(Location.of(str(c))).window(LAYOUT) for c in (state.checkpoint, real))
    assert (ours.id, ours.admitted, ours.stems, ours.seen) == (theirs.id, theirs.admitted, theirs.stems, theirs.seen)
    assert len(ours.seen) == 4 * 7  # two hours and the delivery at their start, in each region


def test_sparks_log_files_are_written_as_spark_writes_them(tmp_path):
    landing = Path(build_local(tmp_path / "history", FILES)["landing"])
    state = write_ingested_state(tmp_path / "lake", str(landing), list(History(FILES).keys()), size=len(BODY),
                                 mtime_ms=0, now=END)
    checkpoint = state.checkpoint
    offsets = parse_offsets((checkpoint / "offsets" / "0").read_bytes())
    assert (offsets.sources, offsets.conf, offsets.timestamp_ms) == ([offset(FILES)], OFFSETS_CONF,
                                                                     int(END.timestamp() * 1000))
    assert (checkpoint / "offsets" / "0").read_bytes().endswith(b'\n{"v": 1, "manifest": %d}' % FILES)
    assert parse_commit((checkpoint / "commits" / "0").read_bytes()) == {"nextBatchWatermarkMs": 0}
    assert json.loads((checkpoint / "metadata").read_bytes()) == {"id": state.query_id}
    for name in ("metadata", "offsets/0", "commits/0"):
        path = checkpoint / name
        assert verify_crc(path.read_bytes(), path.with_name(f".{path.name}.crc").read_bytes()) is True, name

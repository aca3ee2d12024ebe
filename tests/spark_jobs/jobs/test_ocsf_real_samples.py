"""The OCSF jobs on every real sample in ../shared (CloudTrail, Cowrie, Suricata) and a few planted events.

Each raw table is filled by its own job, then read as a stream by its OCSF job (cloudtrail_ocsf, cowrie_ocsf,
suricata_ocsf). Every raw event is then either one row of one OCSF class's table or one row of its OCSF quarantine
with a reason, and every OCSF row validates against the pinned OCSF schema (types and required attributes).
"""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from pyspark.sql import functions as F

from spark_jobs.model.ocsf import OCSF_CLASSES
from spark_jobs.model.ocsf_schema import OCSF_VERSION
from spark_jobs.registry import get_job
from spark_jobs.transforms.ocsf.validate import row_problems, schema_problems
from tests.helpers import ocsf
from tests.helpers.project import REAL_CLOUDTRAIL, REAL_DATA

pytestmark = pytest.mark.real_data
REAL = {"cloudtrail": REAL_CLOUDTRAIL, "cowrie": REAL_DATA / "applogs" / "kareiva_cowrie-logs",
        "suricata": REAL_DATA / "applogs" / "magnc_suricata_data_training"}
RAW_KEYS = {"cloudtrail": "eventID", "cowrie": "event_id", "suricata": "event_id"}
KINDS = {"cloudtrail": "eventName", "cowrie": "eventid", "suricata": "event_type"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory, spark):
    missing = [str(path) for path in REAL.values() if not path.is_dir()]
    if missing:
        pytest.skip(f"the real samples are not at {', '.join(missing)} (they sit beside the project in ../shared)")
    root = tmp_path_factory.mktemp("ocsf")
    landing = {source: root / "landing" / source for source in ocsf.SOURCES}
    for source, path in REAL.items():
        shutil.copytree(path, landing[source])
    ocsf.plant(landing)
    lake = root / "lake"
    summaries = {}
    for source in ocsf.SOURCES:
        ocsf.run(ocsf.RAW_JOBS[source], lake, landing[source], maxFilesPerTrigger="2000")
        summaries[source] = ocsf.run(f"{source}_ocsf", lake)
    return {"root": lake, "summaries": summaries}


def _class_tables(source: str) -> list[str]:
    return [t.name for t in get_job(f"{source}_ocsf").tables if not t.quarantine]


@pytest.mark.parametrize("source", ocsf.SOURCES)
def test_every_raw_event_is_one_ocsf_row_or_quarantined_with_a_reason(lake, spark, source):
    raw = ocsf.read(spark, lake["root"], f"{source}_events")
    keys = {r[0] for r in raw.select(RAW_KEYS[source]).collect()}
    assert len(keys) == raw.count() > 0
    mapped = Counter()
    uids = []
    for table in _class_tables(source):
        rows = ocsf.read(spark, lake["root"], table).where(F.col("metadata.log_name") == f"{source}_events")
        found = rows.select("metadata.uid", "raw_data").collect()
        mapped[table] = len(found)
        uids += [r.uid for r in found]
        assert len({r.raw_data for r in found}) == len(found)
    quarantine = ocsf.read(spark, lake["root"], f"{source}_ocsf_quarantine").collect()
    assert all(r.reason and r.detail for r in quarantine)
    quarantined = [r.source_key for r in quarantine]
    assert len(uids) == len(set(uids)) and len(quarantined) == len(set(quarantined))
    assert set(uids) | set(quarantined) == keys and not set(uids) & set(quarantined)
    assert lake["summaries"][source].rows == {**mapped, f"{source}_ocsf_quarantine": len(quarantine)}
    EXPECTED_ROWS[source](mapped, Counter((r.reason, r[KINDS[source]]) for r in quarantine))


def _cloudtrail(mapped, quarantined):
    # 28,993 real events and 4 planted. 8,184 real records carry no sourceIPAddress and 8,170 no userIdentity (the
    # samples' redacted records): API Activity requires src_endpoint and actor, Authentication user.
    assert dict(mapped) == {"ocsf_api_activity": 20755, "ocsf_authentication": 40, "ocsf_account_change": 25}
    reasons = Counter()
    for (reason, _), count in quarantined.items():
        reasons[reason] += count
    assert dict(reasons) == {"missing_required": 8177}
    assert quarantined[("missing_required", "ConsoleLogin")] == 21
    assert quarantined[("missing_required", "DescribeInstances")] == 247 + 1  # and the planted one without an address


def _cowrie(mapped, quarantined):
    # the real log's shapes (test_real_cowrie_samples.SHAPES) plus the planted events
    assert dict(mapped) == {"ocsf_authentication": 538 + 91 + 1, "ocsf_network_activity": 247 + 247,
                            "ocsf_ssh_activity": 929 + 929 + 895 + 1 + 1, "ocsf_process_activity": 93 + 8 + 1}
    assert dict(quarantined) == {("no_ocsf_class", "cowrie.log.open"): 84, ("no_ocsf_class", "cowrie.log.closed"): 83,
                                 ("no_ocsf_class", "cowrie.session.file_download"): 2,
                                 ("no_ocsf_class", "cowrie.session.file_download.failed"): 1,
                                 ("missing_required", "cowrie.login.failed"): 1}


def _suricata(mapped, quarantined):
    # the real sample: flow 215, ssh 13, stats 13, tls 12; planted: 2 alerts, dns, http, anomaly
    assert dict(mapped) == {"ocsf_detection_finding": 2, "ocsf_network_activity": 215 + 12, "ocsf_dns_activity": 1,
                            "ocsf_http_activity": 1, "ocsf_ssh_activity": 13}
    assert dict(quarantined) == {("no_ocsf_class", "stats"): 13, ("no_ocsf_class", "anomaly"): 1}


EXPECTED_ROWS = {"cloudtrail": _cloudtrail, "cowrie": _cowrie, "suricata": _suricata}


@pytest.mark.parametrize("name", sorted(OCSF_CLASSES))
def test_every_ocsf_row_validates_against_the_pinned_schema(lake, spark, name):
    table = ocsf.read(spark, lake["root"], OCSF_CLASSES[name].table_name)
    assert schema_problems(table.schema, name) == []
    counts = row_problems(table, name)
    assert counts.pop("rows") > 0  # an empty table proves nothing
    assert counts == {}
    assert {r.version for r in table.select("metadata.version").distinct().collect()} == {OCSF_VERSION}


def test_the_quarantine_names_what_ocsf_lacks(lake, spark):
    details = Counter(r.detail for r in ocsf.read(spark, lake["root"], "cloudtrail_ocsf_quarantine").collect())
    assert details == {"missing actor, src_endpoint": 8142, "missing src_endpoint": 14, "missing user": 21}
    [planted] = ocsf.read(spark, lake["root"], "cloudtrail_ocsf_quarantine").where(
        F.col("source_key") == ocsf.CLOUDTRAIL[3]["eventID"]).collect()
    assert (planted.reason, planted.detail, planted.eventName) == ("missing_required", "missing src_endpoint",
                                                                    "DescribeInstances")
    [row] = ocsf.read(spark, lake["root"], "cowrie_ocsf_quarantine").where("reason = 'missing_required'").collect()
    assert (row.detail, row.event_date.isoformat()) == ("missing user", ocsf.DAY)
    assert '"password":"no user given"' in row.raw and not row.raw_truncated

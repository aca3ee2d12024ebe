"""The OCSF jobs on every real sample in ../shared (CloudTrail, Cowrie, Suricata) and a few planted events.

Each raw table is filled by its own job, then read as a stream by its OCSF job (cloudtrail_ocsf, cowrie_ocsf,
suricata_ocsf). Every raw event is then either one row of one OCSF class's table or one row of its OCSF quarantine
with a reason, and every OCSF row validates against the pinned OCSF schema (types and required attributes).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest
from pyspark.sql import functions as F

from spark_jobs.model.ocsf import OCSF_CLASSES
from spark_jobs.model.ocsf_schema import OCSF_VERSION
from spark_jobs.registry import get_job
from spark_jobs.transforms.ocsf.validate import row_problems, schema_problems
from tests.helpers import ocsf
from tests.helpers.project import PROJECT_ROOT, REAL_CLOUDTRAIL, REAL_DATA

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
        ocsf.plant(source, landing[source])
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


def test_a_broken_table_fails_the_validation(lake, spark):
    table = ocsf.read(spark, lake["root"], "ocsf_authentication")
    assert schema_problems(table.drop("user").withColumn("time", F.col("time").cast("string")).schema,
                           "authentication") == [
        "user: required by OCSF 1.6.0, not a column", "time: timestamp_t is bigint, not string"]
    broken = (table.withColumn("user", F.when(F.col("metadata.log_name") == "cowrie_events", F.col("user")))
              .withColumn("type_uid", F.col("type_uid") + F.when(F.col("status_id") == 2, 1).otherwise(0))
              .withColumn("metadata", F.col("metadata").withField("version", F.lit("1.1.0"))))
    assert row_problems(broken, "authentication") == {  # Cowrie's 630 rows, CloudTrail's 40; 542 failed logons
        "rows": 670, "user is NULL": 40, "type_uid is not class_uid * 100 + activity_id": 542,
        "metadata.version is not 1.6.0": 670}
    inside = table.withColumn("metadata", F.col("metadata").withField("product", F.lit(None)))
    assert row_problems(inside, "authentication") == {"rows": 670, "metadata.product is NULL": 670}


def _questions() -> list[str]:
    text = (PROJECT_ROOT / "docs" / "ocsf.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def answers(lake, spark):
    from spark_jobs.driver.sql import duckdb_connection, register_tables
    from spark_jobs.model.lake import Lake

    register_tables(spark, Lake(lake["root"]))
    con, _ = duckdb_connection(Lake(lake["root"]))
    return [([tuple(r) for r in spark.sql(query).collect()], con.execute(query).fetchall()) for query in _questions()]


def test_everything_an_ip_did_is_one_select_through_spark_and_duckdb(answers):
    spark_rows, duckdb_rows = answers[0]
    assert spark_rows == duckdb_rows
    assert [row[1:] for row in spark_rows] == [  # the planted events of the attacker's address, in time order
        ("Authentication", "Logon", "CloudTrail", "Failure", "alice"),
        ("Account Change", "Create", "CloudTrail", "Success", "mallory"),
        ("API Activity", "Read", "CloudTrail", "Success", "ListBuckets"),
        ("SSH Activity", "Open", "Cowrie", None, "ssh"),
        ("Authentication", "Logon", "Cowrie", "Failure", "root"),
        ("Process Activity", "Launch", "Cowrie", "Success", "uname -a"),
        ("Detection Finding", "Create", "Suricata", None, "GPL ATTACK_RESPONSE id check returned root"),
        ("Detection Finding", "Create", "Suricata", None, "ET USER_AGENTS Go HTTP Client User-Agent"),
        ("DNS Activity", "Query", "Suricata", None, "evil.example"),
        ("HTTP Activity", "Get", "Suricata", None, "http://evil.example/x.sh")]


def test_every_failed_authentication_is_one_select_through_spark_and_duckdb(answers):
    spark_rows, duckdb_rows = answers[1]
    assert sorted(spark_rows, key=repr) == sorted(duckdb_rows, key=repr)  # ties in time may come in either order
    assert Counter(row[1] for row in spark_rows) == {"CloudTrail": 2 + 1, "Cowrie": 538 + 1}
    assert sorted(row[1:] for row in spark_rows if row[1] == "CloudTrail") == [
        ("CloudTrail", "HIDDEN_DUE_TO_SECURITY_REASONS", "83.37.50.95", "No username found in supplied account"),
        ("CloudTrail", "alice", ocsf.ATTACKER, "Failed authentication"),
        ("CloudTrail", "alucloud34", "213.37.139.133", "Failed authentication")]
    assert Counter(row[2] for row in spark_rows if row[1] == "Cowrie").most_common(2) == [("", 197), ("admin", 62)]


def test_every_detection_finding_of_the_day_is_one_select_through_spark_and_duckdb(answers):
    spark_rows, duckdb_rows = answers[2]
    assert spark_rows == duckdb_rows
    assert [row[1:] for row in spark_rows] == [
        ("High", "GPL ATTACK_RESPONSE id check returned root", "1:2100498:7", "ids-1"),
        ("Low", "ET USER_AGENTS Go HTTP Client User-Agent", "1:2024897:2", "ids-1")]

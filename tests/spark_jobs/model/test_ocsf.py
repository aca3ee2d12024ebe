"""The OCSF declarations against the pinned schema, read offline from the installed package (no JVM)."""

from __future__ import annotations

import json

import pytest

from spark_jobs.model.ocsf import OCSF_CLASSES, ocsf_job
from spark_jobs.model.ocsf_schema import OCSF_VERSION, ocsf_schema, schema_path
from spark_jobs.registry import JOBS


def test_the_schema_is_the_pinned_version_from_the_installed_package():
    assert OCSF_VERSION == "1.6.0"
    path = schema_path()
    assert path.name == "v1_6_0.json" and "site-packages" in str(path)
    assert json.loads(path.read_text())["version"] == ocsf_schema().version == OCSF_VERSION


def test_a_version_the_package_lacks_is_refused_with_the_way_out():
    with pytest.raises(FileNotFoundError, match=r"no OCSF 9\.9\.9 schema .* install the version requirements.txt pins"):
        schema_path("9.9.9")


@pytest.mark.parametrize("name", sorted(OCSF_CLASSES))
def test_each_class_uid_is_the_schemas(name):
    assert OCSF_CLASSES[name].uid == ocsf_schema().class_uid(name)


def test_the_schema_resolves_inheritance_and_refined_types():
    schema = ocsf_schema()
    api = schema.attributes("api_activity")
    assert {n for n, a in api.items() if a.required} == {
        "activity_id", "actor", "api", "category_uid", "class_uid", "metadata", "severity_id", "src_endpoint", "time",
        "type_uid"}
    assert (api["src_endpoint"].type, api["time"].type, api["unmapped"].type) == ("network_endpoint", "timestamp_t",
                                                                                  "object")
    assert schema.attributes("api_activity", profiles=("cloud",))["cloud"].required
    assert [schema.primitive(t) for t in ("ip_t", "port_t", "timestamp_t", "json_t", "network_endpoint")] == [
        "string_t", "integer_t", "long_t", "json_t", None]
    assert schema.enum("api_activity", "activity_id") == {0: "Unknown", 1: "Create", 2: "Read", 3: "Update",
                                                          4: "Delete", 99: "Other"}


def test_each_ocsf_job_writes_its_classes_tables_and_its_quarantine():
    tables = {name: [t.name for t in JOBS[name].tables] for name in ("cloudtrail_ocsf", "cowrie_ocsf", "suricata_ocsf")}
    assert tables == {
        "cloudtrail_ocsf": ["ocsf_api_activity", "ocsf_authentication", "ocsf_account_change",
                            "cloudtrail_ocsf_quarantine"],
        "cowrie_ocsf": ["ocsf_authentication", "ocsf_network_activity", "ocsf_ssh_activity", "ocsf_process_activity",
                        "cowrie_ocsf_quarantine"],
        "suricata_ocsf": ["ocsf_detection_finding", "ocsf_network_activity", "ocsf_dns_activity",
                          "ocsf_http_activity", "ocsf_ssh_activity", "suricata_ocsf_quarantine"]}
    job = JOBS["cowrie_ocsf"]
    assert (job.source.table, job.output_mode, job.accepts_backfill) == ("cowrie_events", "append", False)
    assert job.table("ocsf_authentication") is not None and job.table("ocsf_authentication") == \
        JOBS["cloudtrail_ocsf"].table("ocsf_authentication")
    assert job.table("ocsf_ssh_activity").route == "reason IS NULL AND class_uid = 4007"
    assert job.table("cowrie_ocsf_quarantine").route == "reason IS NOT NULL"


def test_a_job_of_an_unknown_class_is_refused():
    with pytest.raises(KeyError, match="file_activity"):
        ocsf_job("cowrie", classes=("file_activity",), description="x")

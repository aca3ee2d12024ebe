"""The openlineage-spark listener is on no Spark start unless turned on; on, every spark-submit carries its pinned jar
and settings (file transport into the lake, or HTTP with $OPENLINEAGE_URL)."""

from __future__ import annotations

from spark_jobs.launch.jars import OPENLINEAGE_SPARK
from spark_jobs.launch.lineage_listener import LISTENER_CLASS, listener_jar, with_listener
from spark_jobs.launch.submit import Submission


def test_the_listener_is_off_unless_turned_on():
    assert with_listener("a.jar", {"k": "v"}, {}) == ("a.jar", {"k": "v"})
    plain = Submission.of(["run", "cloudtrail_etl"], name="cloudtrail_etl")
    assert OPENLINEAGE_SPARK.file_name not in plain.jars and "spark.extraListeners" not in plain.conf


def test_turned_on_it_brings_its_jar_and_file_transport_into_the_lake(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_JOBS_LINEAGE_LISTENER", "on")
    monkeypatch.setenv("LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    submission = Submission.of(["run", "cloudtrail_etl"], name="cloudtrail_etl",
                               extra_conf={"spark.openlineage.parentRunId": "01939a8e-0000-7000-8000-000000000001"})
    assert submission.jars.split(",")[-1] == listener_jar() and listener_jar().endswith(OPENLINEAGE_SPARK.file_name)
    assert {k: v for k, v in submission.conf.items() if "openlineage" in k or "Listeners" in k} == {
        "spark.extraListeners": LISTENER_CLASS, "spark.openlineage.namespace": "spark_jobs",
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": f"{tmp_path}/lake/_lineage/listener/events.jsonl",
        "spark.openlineage.parentRunId": "01939a8e-0000-7000-8000-000000000001"}
    _, conf = with_listener("", {}, {"SPARK_JOBS_LINEAGE_LISTENER": "on", "OPENLINEAGE_URL": "http://marquez:5000"})
    assert (conf["spark.openlineage.transport.type"], conf["spark.openlineage.transport.url"]) == (
        "http", "http://marquez:5000")

"""The recovery trial's reading of which landed files a checkpoint has committed."""

import json

from tools.bench.supervised_job import committed_files


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", *lines]))


def _source_batch(checkpoint, batch_id, names):
    _write(checkpoint / "sources" / "0" / str(batch_id),
           [json.dumps({"path": f"file:///landing/{n}", "timestamp": 1, "batchId": batch_id}) for n in names])


def test_a_source_log_ahead_of_the_query_batches_is_read_through_the_offsets(tmp_path):
    # A driver killed after its file source logged batch 1's files but before it wrote offsets/1:
    # the next driver planned query batch 1 as source-log batches 1 and 2 ({"logOffset": 2}).
    checkpoint = tmp_path / "checkpoint"
    _source_batch(checkpoint, 0, ["a.json.gz"])
    _source_batch(checkpoint, 1, ["b.json.gz"])
    _source_batch(checkpoint, 2, ["c.json.gz"])
    _source_batch(checkpoint, 3, ["d.json.gz"])  # logged by the source, in no batch yet
    for batch, log_offset in ((0, 0), (1, 2)):
        _write(checkpoint / "offsets" / str(batch), [json.dumps({"batchWatermarkMs": 0}), json.dumps({"logOffset": log_offset})])
        _write(checkpoint / "commits" / str(batch), [json.dumps({"nextBatchWatermarkMs": 0})])

    assert committed_files(checkpoint) == {"a.json.gz", "b.json.gz", "c.json.gz"}


def test_a_discovering_streams_committed_files_are_those_of_its_manifests_up_to_the_last_commit(tmp_path):
    from spark_jobs.control.checkpoint.store import Location
    from spark_jobs.control.discovery.listing import Candidate
    from spark_jobs.control.discovery.state import DiscoveryLog, Manifest

    checkpoint = tmp_path / "checkpoint"
    log = DiscoveryLog(Location.of(str(checkpoint)))
    for number, names in ((1, ["a.json.gz"]), (2, ["b.json.gz", "c.json.gz"]), (3, ["d.json.gz"])):
        log.write_manifest(Manifest(number, [Candidate(f"file:/landing/{n}", 1, 1, 1, True) for n in names]))
    for batch in (0, 1):  # manifest 3 is planned (offsets/2), not committed
        _write(checkpoint / "commits" / str(batch), [json.dumps({"nextBatchWatermarkMs": 0})])
    for batch in (0, 1, 2):
        _write(checkpoint / "offsets" / str(batch), [json.dumps({"batchWatermarkMs": 0}),
                                                      json.dumps({"v": 1, "manifest": batch + 1})])
    assert committed_files(checkpoint) == {"a.json.gz", "b.json.gz", "c.json.gz"}


def test_nothing_is_committed_before_the_first_commit(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    _source_batch(checkpoint, 0, ["a.json.gz"])
    assert committed_files(checkpoint) == set()


def test_the_airflow_trial_gives_its_components_its_own_database_lake_landing_and_overrides(tmp_path):
    from tools.bench.recovery_airflow import DAG_ID, airflow_env

    env = airflow_env(tmp_path / "airflow", tmp_path / "lake", tmp_path / "landing", "processing-time:2s",
                      {"healthy_reset_seconds": 60})
    assert DAG_ID == "cloudtrail_etl_continuous"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path}/airflow/airflow.db"
    assert env["LAKE_ROOT"] == str(tmp_path / "lake")
    assert env["CLOUDTRAIL_ETL_INPUT"] == str(tmp_path / "landing")
    assert env["STREAMING_CONTINUOUS_TRIGGER"] == "processing-time:2s"
    assert json.loads(env["STREAMING_SUPERVISOR_POLICY"]) == {"healthy_reset_seconds": 60}
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "True"
    # No override asked for: the operator uses the registry's trigger and policy.
    plain = airflow_env(tmp_path / "airflow", tmp_path / "lake", tmp_path / "landing", None, None)
    assert "STREAMING_CONTINUOUS_TRIGGER" not in plain and "STREAMING_SUPERVISOR_POLICY" not in plain


def test_the_trial_command_takes_through_cli_or_airflow():
    import argparse

    import pytest

    from tools.bench.recovery import add_trial_arguments

    parser = argparse.ArgumentParser()
    add_trial_arguments(parser)
    assert parser.parse_args(["recovery"]).through == "cli"
    assert parser.parse_args(["recovery", "--through", "airflow"]).through == "airflow"
    with pytest.raises(SystemExit):
        parser.parse_args(["recovery", "--through", "yarn"])

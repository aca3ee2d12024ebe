"""cloudtrail_etl_continuous under a real Airflow scheduler, reading CloudTrail from a bucket of the local S3
server (moto, tools/s3_server.py): the supervised driver ingests what lands in the bucket, is restarted after
kill -9 with exact tables, and the secret key appears in no log, no command line and no page of the run.

The job's input is ``s3a://<bucket>/AWSLogs`` (``$CLOUDTRAIL_ETL_INPUT``); the lake is local (the
supervisor's driver log and the incidents need a local control folder, docs/object-store.md). Airflow
hands the bucket's settings to the driver from its ``aws_default`` connection (``AIRFLOW_CONN_AWS_DEFAULT``:
login, password, region, endpoint, as a person adds it under Admin > Connections); the scheduler's
own processes (the supervisor's backlog listing, the health trigger) reach the bucket through the
standard AWS variables, as workers with an instance role would.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers.airflow_fixtures import require_airflow_env
from tests.helpers.real_airflow import RestApi, wait_for
from tests.helpers.processes import table_event_ids

from tools.local_airflow import LocalAirflow, free_port, marked_processes
from tools.s3_server import LocalS3

DAG_ID = "cloudtrail_etl_continuous"
JOB = "cloudtrail_etl"
BUCKET = "cloudtrail-continuous"
SECRET = "airflow-S3-secret-Qx81Lm2Zt"  # the aws_default connection's
PROCESS_SECRET = "worker-env-secret-Hb47Rn"  # the Airflow processes' own (their "instance role")
POLICY = {"initial_backoff_seconds": 1, "multiplier": 2, "max_backoff_seconds": 2, "max_restarts": 3,
          "window_seconds": 900, "poll_seconds": 1, "stop_grace_seconds": 40, "warm_standby": False}


class Setup:
    def __init__(self, root: Path, server: LocalS3) -> None:
        self.root, self.server = root, server
        self.lake, self.home = root / "lake", root / "airflow_home"
        self.expected: list[str] = []
        connection = {"conn_type": "aws", "login": server.access_key, "password": server.secret_key,
                      "extra": {"region_name": "us-east-1", "endpoint_url": server.endpoint}}
        env = {**os.environ, **server.environment(), "AWS_ACCESS_KEY_ID": "AKIAWORKERENV",
               "AWS_SECRET_ACCESS_KEY": PROCESS_SECRET,
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
               "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
               "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection),
               "LAKE_ROOT": str(self.lake),
               "CLOUDTRAIL_ETL_INPUT": f"s3a://{BUCKET}/AWSLogs",
               "STREAMING_CONTINUOUS_TRIGGER": "processing-time:1s",
               "STREAMING_SUPERVISOR_POLICY": json.dumps(POLICY)}
        self.airflow = LocalAirflow(self.home, free_port(), env, auth="simple")

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        return RestApi(self.airflow.url)(method, path, body)

    def land(self, name: str, files: int = 2, records: int = 3) -> None:
        """``files`` CloudTrail objects of ``records`` fresh events each, uploaded under the CloudTrail layout."""
        client = self.server.client()
        for f in range(files):
            ids = [f"{name}-{f}-{r}" for r in range(records)]
            document = {"Records": [{"eventVersion": "1.08", "eventID": event_id,
                                     "eventTime": f"2024-03-02T10:{f:02d}:{r:02d}Z",
                                     "eventSource": "s3.amazonaws.com", "eventName": "GetObject",
                                     "awsRegion": "us-east-1"} for r, event_id in enumerate(ids)]}
            key = (f"AWSLogs/123456789012/CloudTrail/us-east-1/2024/03/02/"
                   f"123456789012_CloudTrail_us-east-1_20240302T10{f:02d}Z_{name}.json.gz")
            client.put_object(Bucket=BUCKET, Key=key, Body=gzip.compress(json.dumps(document).encode()))
            self.expected += ids

    def event_ids(self) -> list[str]:
        """Every eventID in cloudtrail_events (delta-rs); none before the table's first commit."""
        try:
            return sorted(table_event_ids(self.lake))
        except Exception:  # noqa: BLE001 - no table, or no commit yet
            return []

    def supervisor_state(self) -> dict:
        path = self.lake / "control" / JOB / "supervisor.json"
        return json.loads(path.read_text()) if path.exists() else {}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    require_airflow_env()
    root = tmp_path_factory.mktemp("continuous-s3")
    server = LocalS3(access_key="AKIACONTINUOUSTEST", secret_key=SECRET, log_path=root / "moto.log").start()
    server.create_bucket(BUCKET)
    setup = Setup(root, server)
    try:
        setup.airflow.start()
        wait_for(f"the dag-processor to parse {DAG_ID}", lambda: setup.api("GET", f"/dags/{DAG_ID}"))
        yield setup
    finally:
        setup.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
        setup.airflow.stop(grace=20)
        server.stop()
    assert marked_processes(str(setup.home)) == {}, "processes of the test Airflow outlived `stop`"


def live_driver(setup: Setup) -> dict:
    return wait_for("a running driver", lambda: (s := setup.supervisor_state()).get("state") == "running"
                    and s.get("driver_pid") and s)


def test_the_supervised_driver_reads_the_bucket_and_is_restarted_after_kill_9_with_exact_tables(setup):
    setup.land("a")
    setup.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
    wait_for("the first objects in cloudtrail_events", lambda: setup.event_ids() == sorted(setup.expected))
    before = live_driver(setup)
    command_lines = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    assert "run cloudtrail_etl --trigger" in command_lines and SECRET not in command_lines

    os.kill(before["driver_pid"], signal.SIGKILL)
    setup.land("b")
    wait_for("the restart", lambda: setup.supervisor_state().get("restarts_total") == 1)
    after = live_driver(setup)
    wait_for("objects b in cloudtrail_events", lambda: len(setup.event_ids()) >= len(setup.expected))
    assert setup.event_ids() == sorted(setup.expected)  # nothing lost, nothing twice
    assert after["driver_pid"] != before["driver_pid"]
    # The driver's environment came from the aws_default connection (not the workers' own variables)...
    environ = Path(f"/proc/{after['driver_pid']}/environ").read_bytes().split(b"\0")
    assert f"AWS_SECRET_ACCESS_KEY={SECRET}".encode() in environ and b"AWS_ACCESS_KEY_ID=AKIACONTINUOUSTEST" in environ

    # ...and in no log, page or state file of the run, nor in any process's command line.
    run = setup.api("GET", f"/dags/{DAG_ID}/dagRuns")["dag_runs"][0]
    pages = [setup.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances"),
             setup.api("GET", f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}"), setup.api("GET", "/connections")]
    for secret in (SECRET, PROCESS_SECRET):
        assert secret not in json.dumps(pages)
        assert secret not in subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
        leaked = [str(path) for folder in (setup.home, setup.lake)
                  for path in folder.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]
        assert leaked == [], secret

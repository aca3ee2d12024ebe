"""``python -m spark_jobs rollout JOB VERSION --destructive [--yes]`` as a person runs it: the plan without ``--yes``
(exit 2, nothing asked for), the request with it, and the refusals naming the way out."""

from __future__ import annotations

from spark_jobs.control.rollout.preflight_state import write_preflight
from spark_jobs.control.rollout.request import read_rollout
from spark_jobs.control.supervision.state import SupervisorState, write_supervisor_state
from spark_jobs.launch.releases import RELEASES_ENV, add_release
from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tests.helpers.project import PROJECT_ROOT, run_cli

# JVM-free, yet out of the fast tier: four runs of the command line, each asking the release's registry in a Python of
# its own (about 8 s).
NOT_IN_THE_FAST_TIER = "runs the command line four times, each with a Python of its own for the release (about 8 s)"
JOB = get_job("cloudtrail_etl")


def test_a_destructive_rollout_prints_its_plan_until_yes_and_refuses_a_version_that_passed(tmp_path):
    releases = tmp_path / "releases"
    add_release("v3", package_dir=PROJECT_ROOT / "spark_jobs", root=releases)
    lake = Lake(tmp_path / "lake")
    control = str(lake.control_path(JOB.name))
    write_supervisor_state(control, SupervisorState(JOB.name, 1800, 5, state="running"))
    env = {RELEASES_ENV: str(releases)}
    args = ("rollout", JOB.name, "v3", "--lake", str(lake.root))

    write_preflight(control, "v3", "c0de", [], ["outputs"], 1.0)
    passed = run_cli(*args, "--destructive", env=env, timeout=120)
    assert passed.returncode == 2 and passed.stderr.startswith(
        "error: version v3 passed its pre-flight for cloudtrail_etl (at "), passed.stderr
    assert passed.stderr.rstrip().endswith("without a new checkpoint or a rebuild; use rollout")

    write_preflight(control, "v3", "c0de", [{"code": "output_schema_changed", "explanation": "a column type changes",
                                             "action": "..."}], ["outputs"], 1.0)
    plan = run_cli(*args, "--destructive", env=env, timeout=120)
    assert plan.returncode == 2, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[0].startswith("1. pre-flight refused v3 for cloudtrail_etl at ") and lines[0].endswith(
        ": a column type changes")
    assert [line.split(". ", 1)[0] for line in lines[:-1]] == [str(n) for n in range(1, len(lines))]
    assert lines[-1] == ("run again with --yes to do it (the on-call action rollout_destructive asks a second person "
                         "first)")
    assert read_rollout(control) is None  # nothing asked for

    yes_alone = run_cli(*args, "--yes", env=env, timeout=120)
    assert (yes_alone.returncode, yes_alone.stderr.strip()) == (
        2, "error: --yes is for --destructive only (a rollout is checked in pre-flight, nothing to confirm)")

    asked = run_cli(*args, "--destructive", "--yes", "--by", "alice", "--reason", "a column type", env=env,
                    timeout=120)
    assert asked.returncode == 0, asked.stderr
    request = read_rollout(control)
    assert asked.stdout.strip() == f"destructive rollout {request['id']}: the checkout -> v3, phase requested"
    assert (request["destructive"], request["by"], request["reason"]) == (True, "alice", "a column type")

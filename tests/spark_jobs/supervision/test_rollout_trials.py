"""A short run of the rollout trials (``python -m spark_jobs trial rollout`` and ``trial rollout-kills`` run five
rollouts and ten kills or more): one real supervisor (``python -m spark_jobs supervise``, its own process) and real
drivers, files landing every second, releases of real code changes. One rollout is measured (its time without
commits, from the Delta log), then two rollouts are each hit by a kill -9: the old driver's process group during the
handover, and the supervisor itself during the rollback of a version that crashes in its first batch (it is started
again). After each, the rollout ended in a defined state, every landed event is in the table once, one driver holds
the lease and each Delta log has one writer."""

from __future__ import annotations

from tools.bench.rollout_bench import RolloutBench
from tools.bench.rollout_kills import run_kill_trials
from tools.bench.rollouts import measure_rollouts

NOT_IN_THE_FAST_TIER = "the trials start `python -m spark_jobs supervise` and its drivers (a JVM each) in subprocesses"


def test_rollouts_are_measured_and_kills_during_them_lose_and_duplicate_nothing(tmp_path):
    bench = RolloutBench(tmp_path / "bench", seed=59, policy={"probation_seconds": 5})
    try:
        bench.start()
        [measured] = measure_rollouts(bench, 1)
        trials = run_kill_trials(bench, 2, pairs=[("handover", "old"), ("rollback", "supervisor")])
        end = bench.finish()
    finally:
        bench.close()

    assert measured["phase"] == "done" and measured["to"] == "v2", measured
    assert 0 < measured["gap_s"] < 60 and measured["from"] != "v2"  # the figure is the trial's
    for trial in trials:
        assert trial["defined"] and trial["exact"] and trial["one_writer"], trial
        assert trial["rows"] == trial["distinct_event_ids"] == trial["events_landed"], trial
    handover, rollback = trials
    assert handover["killed"].startswith("the process group") and handover["outcome"] in ("done", "failed",
                                                                                          "rolled_back"), handover
    assert rollback["killed"].startswith("the supervisor") and rollback["version"] == "v4", rollback
    assert rollback["outcome"] == "rolled_back" and rollback["running"] == rollback["from_version"], rollback
    assert end["exact"] and end["one_writer"], end
    assert end["rows"] == end["distinct_event_ids"] == end["events_landed"] and not end["txn_problems"], end
    assert end["supervisor_exit_status"] == 0 and end["processes_left"] == [], end

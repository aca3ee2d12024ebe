"""The one rule for a job's input: given, else $<JOB>_INPUT, else the registry's; relative paths by origin."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.model.inputs import input_path, named_input
from spark_jobs.model.lake import PROJECT_ROOT
from spark_jobs.model.streams import KafkaSource
from spark_jobs.registry import JOBS, get_job

FILES = get_job("cloudtrail_etl")
KAFKA = next(job for job in JOBS.values() if isinstance(job.source, KafkaSource))


def test_given_wins_then_the_environment_then_the_registry():
    env = {FILES.input_env_var: "/from/env"}
    assert named_input(FILES, "/given", environ=env) == "/given"
    assert named_input(FILES, None, environ=env) == "/from/env"
    assert named_input(FILES, None, environ={}) == FILES.default_input
    assert named_input(FILES, None, default="/checkpoint's", environ={}) == "/checkpoint's"


def test_a_kafka_jobs_default_is_its_topics():
    assert named_input(KAFKA, None, environ={}) == KAFKA.source.topics
    assert named_input(KAFKA, None, environ={KAFKA.input_env_var: "a,b"}) == "a,b"


def test_relative_folders_are_relative_to_where_they_come_from(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert input_path(FILES, "in", environ={}) == tmp_path / "in"  # a command line's: the current directory
    assert input_path(FILES, None, environ={FILES.input_env_var: "in"}) == PROJECT_ROOT / "in"
    assert input_path(FILES, None, environ={}) == PROJECT_ROOT / FILES.default_input
    assert input_path(FILES, "~/in", environ={}) == Path.home() / "in"

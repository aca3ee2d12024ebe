"""``python -m spark_jobs supervise``: bad values fail fast with one line naming them (nothing is started)."""

from __future__ import annotations

import pytest

from tests.helpers.project import run_cli


@pytest.mark.parametrize("args, message", [
    (["--policy", '{"max_restarts": 2, "retries": 1}'],
     "error: unknown RestartPolicy field(s) retries in --policy; fields: initial_backoff_seconds, multiplier,"),
    (["--policy", "max_restarts=2"], "error: --policy 'max_restarts=2' is not JSON"),
    (["--trigger", "available-now"], "error: a supervised run needs a processing-time trigger, got 'available-now'"),
    (["--input", "/no/such/folder"], "error: input folder '/no/such/folder' does not exist"),
])
def test_bad_values_fail_fast_with_one_line_naming_them(tmp_path, args, message):
    result = run_cli("supervise", "cloudtrail_etl", "--lake", str(tmp_path / "lake"),
                     *(["--input", str(tmp_path)] if "--input" not in args else []), *args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "lake").exists()  # no driver was started, no state written

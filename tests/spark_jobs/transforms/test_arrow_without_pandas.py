"""pyarrow in a Python worker without pandas (spark_jobs/transforms/arrow_without_pandas.py), each case in a fresh
interpreter: pandas is imported once per process, so only a new process shows whether something imports it."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.project import PROJECT_ROOT

BATCHES = """
import datetime as dt
import pyarrow as pa
from spark_jobs.transforms.cloudtrail.decode import _split_arrow_schema
pa.RecordBatch.from_pydict({"source_file": ["f"], "text": ["t"], "shape": ["s"], "rescued": [[(1, "a")]],
                            "raw": [[(2, "b")]], "pieces": [[{"record_index": 1, "raw": "r", "reason": "x",
                                                              "detail": None, "rescued": None}]]},
                           schema=_split_arrow_schema())
pa.array([dt.datetime.now(dt.timezone.utc)], type=pa.timestamp("us", tz="UTC"))
pa.array([b"gz"], type=pa.binary())
print("pandas" in sys.modules)
"""


def python(code: str) -> list[str]:
    """What ``code`` prints in a fresh interpreter, split into words."""
    done = subprocess.run([sys.executable, "-c", f"import sys\n{code}"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_without_settle_pyarrow_imports_pandas_for_a_batch_of_python_values():
    # What the module is for: if pyarrow stops doing this, the module can go.
    assert python(BATCHES) == ["True"]


def test_a_settled_worker_builds_its_batches_without_importing_pandas():
    settle = "from spark_jobs.transforms import arrow_without_pandas\narrow_without_pandas.settle()\n"
    assert python(settle + BATCHES) == ["False"]


def test_pandas_still_imports_and_pyarrow_still_converts_to_it_after_settle():
    code = """
from spark_jobs.transforms import arrow_without_pandas
arrow_without_pandas.settle()
import pyarrow as pa
frame = pa.table({"a": pa.array([1, 2], type=pa.int64())}).to_pandas()
import pandas
print(type(frame).__name__, frame["a"].tolist() == [1, 2], pa.Array.from_pandas(pandas.Series(["x"])).type)
"""
    assert python(code) == ["DataFrame", "True", "string"]


def test_settle_in_a_process_that_already_uses_pandas_changes_nothing():
    code = """
import pandas
from spark_jobs.transforms import arrow_without_pandas
arrow_without_pandas.settle()
import pyarrow as pa
print(pa.array(pandas.Series([1, 2])).type, pa.array(pandas.Categorical(["a", "a"])).type)
"""
    assert python(code) == ["int64", "dictionary<values=string,", "indices=int8,", "ordered=0>"]


def test_a_settled_worker_that_imports_pandas_afterwards_converts_pandas_objects_as_pandas():
    # As a Python worker that decoded files and then runs a pandas UDF (transformWithStateInPandas) converts them.
    code = """
from spark_jobs.transforms import arrow_without_pandas
arrow_without_pandas.settle()
import pyarrow as pa
pa.array(["x"], type=pa.string())
import pandas
times = pandas.Series(pandas.to_datetime(["2024-03-01T10:00:00.123456789Z", None], utc=True))
print(pa.Array.from_pandas(pandas.Series(pandas.Categorical(["a", "a"]))).type.index_type,
      pa.Array.from_pandas(times).type, pa.Array.from_pandas(times).null_count, pandas.__spec__.name)
"""
    assert python(code) == ["int8", "timestamp[ns,", "tz=UTC]", "1", "pandas"]

"""pyarrow without pandas in Spark's Python workers: :func:`settle`.

pyarrow imports pandas the first time it builds an array from Python objects (``pa.array``,
``RecordBatch.from_pydict``, ``from_arrays`` of lists), to ask whether those objects are pandas ones. In a
Python worker of this project that import is all pandas is ever used for: the decoding ``mapInArrow`` bodies and
the landing source's reads hand pyarrow lists of Python values, never pandas objects. Importing pandas costs a
new Python worker CPU time on the first batch's path (the figures are in docs/benchmarks.md).

:func:`settle` lets pyarrow ask once while pandas cannot be imported (a finder first on ``sys.meta_path``
refuses it), so pyarrow settles on "no pandas" for those questions; then the finder goes. ``import pandas`` works
as before, and whatever asks pyarrow for pandas itself (``Table.to_pandas``) imports it then. A worker that imports
pandas after it settled (Spark reuses a Python worker for any Python task of its driver: a pandas UDF may come
next) has pyarrow told right after the import, so pandas objects are converted as pandas again. pyarrow has no
setting for this, hence this module; a pyarrow that asks differently only imports pandas again
(``tests/spark_jobs/transforms/test_arrow_without_pandas.py`` says when).
"""

from __future__ import annotations

import importlib.util
import sys

_settled = False


def settle() -> None:
    """Once per process, before the first array built from Python objects: pyarrow's pandas check, without pandas.
    A no-op when pandas is already imported (the process uses it: the check finds it, as it would anyway)."""
    global _settled
    if _settled:
        return
    _settled = True
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NO_PANDAS)
    try:
        pa.array([], type=pa.null())  # pyarrow's first check: pandas is not importable
    finally:
        sys.meta_path.remove(_NO_PANDAS)
    sys.meta_path.insert(0, _PandasWatch())


class _NoPandas:
    """A finder that refuses to import pandas (first on ``sys.meta_path`` while :func:`settle` runs)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas":
            raise ImportError("pandas is not imported by a Spark worker of this project (arrow_without_pandas)")
        return None


_NO_PANDAS = _NoPandas()


class _PandasWatch:
    """A finder that, when something imports pandas after :func:`settle`, has pandas loaded as usual and then
    tells pyarrow it is there (a pandas object handed to pyarrow afterwards is converted as pandas again)."""

    def find_spec(self, name, path=None, target=None):
        if name != "pandas":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)  # as the finders after this one would find it
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenTellPyarrow(spec.loader)
        return spec


class _ThenTellPyarrow:
    """pandas' own loader, and after it has run, pyarrow's pandas check made again (``_pandas_api.version`` imports
    what it needs when pandas was missing before)."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        from pyarrow.lib import _pandas_api

        _pandas_api.version  # noqa: B018 - the property makes pyarrow import pandas (loaded now) and use it

    def __getattr__(self, name):
        return getattr(self._loader, name)

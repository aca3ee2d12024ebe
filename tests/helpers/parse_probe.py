"""Parse a DAG folder the way Airflow does and report what parsing touched, as one JSON line.

Usage (the tests run it in a fresh interpreter, so ``sys.modules`` starts empty)::

    python tests/helpers/parse_probe.py DAGS_FOLDER

Connection and Variable lookups are replaced by functions that record the call and raise, so a
lookup is reported even when the DAG file swallows the error. After the DagBag has parsed the
folder, each file is executed once more under an audit hook that records every file it opens
(other than the DAG file itself). The report is printed as ``PARSE_PROBE {...}``.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

MARKER = "PARSE_PROBE "


def main(dags_folder: Path) -> dict:
    lookups: list[str] = []

    def refuse(what: str):
        def lookup(*args, **kwargs):
            lookups.append(f"{what}{tuple(a for a in args if not isinstance(a, type))}")
            raise RuntimeError(f"{what} called while parsing DAG files")

        return lookup

    import airflow.sdk.execution_time.context as sdk_context
    from airflow.models.connection import Connection
    from airflow.models.variable import Variable

    # The Task SDK's Connection.get / BaseHook.get_connection / Variable.get go through these.
    sdk_context._get_connection = refuse("Connection.get")
    sdk_context._async_get_connection = refuse("Connection.async_get")
    sdk_context._get_variable = refuse("Variable.get")
    # The core models, for DAG files that still import them.
    Connection.get_connection_from_secrets = classmethod(refuse("Connection.get_connection_from_secrets"))
    Variable.get = classmethod(refuse("Variable.get"))

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dags_folder), safe_mode=False)
    report = {
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "dag_ids": sorted(bag.dag_ids),
        "files": sorted(str(f) for f in bag.file_last_changed),
    }

    dag_files = sorted(str(p) for p in dags_folder.glob("*.py"))
    opened: list[str] = []

    def audit(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, bytes, Path)) and str(args[0]) not in dag_files:
            opened.append(str(args[0]))

    sys.addaudithook(audit)
    for path in dag_files:
        try:
            runpy.run_path(path)
        except Exception:  # noqa: BLE001 - the DagBag pass above already reported import errors
            pass
    report.update(
        lookups=lookups,
        opened=opened,
        pyspark=sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")),
        spark_jobs=sorted(m for m in sys.modules if m == "spark_jobs" or m.startswith("spark_jobs.")),
    )
    return report


if __name__ == "__main__":
    print(MARKER + json.dumps(main(Path(sys.argv[1]).resolve())))

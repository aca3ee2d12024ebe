"""``python -m spark_jobs ...`` and ``spark-submit spark_jobs/__main__.py ...``: see spark_jobs.cli.main."""

import sys
from pathlib import Path

if not __package__:  # run as a script by spark-submit: make the package importable
    from importlib.util import find_spec

    # A release's driver has its package first on PYTHONPATH (docs/deploying.md): that one runs, not this file's.
    if find_spec("spark_jobs") is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_jobs.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

"""The executors' code zip: the package's Python files, named by their content, the same bytes for the same code."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from spark_jobs.launch import code_zip
from tests.helpers.project import PROJECT_ROOT


def make_package(root, files: dict[str, str]):
    package = root / "pkg"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_the_zip_holds_the_packages_python_files_under_its_name(tmp_path):
    package = make_package(tmp_path, {"__init__.py": "", "a.py": "X = 1\n", "sub/b.py": "Y = 2\n",
                                      "sub/__pycache__/b.cpython-311.pyc": "junk", "reports/r.json": "{}"})

    built = code_zip.build(tmp_path / "out", package)

    assert built.name == code_zip.zip_name(package) and built.name.startswith("pkg-")
    with zipfile.ZipFile(built) as archive:
        assert archive.namelist() == ["pkg/__init__.py", "pkg/a.py", "pkg/sub/b.py"]
        assert archive.read("pkg/sub/b.py") == b"Y = 2\n"


def test_the_same_code_gives_the_same_name_and_bytes_and_a_change_a_new_zip(tmp_path):
    package = make_package(tmp_path, {"__init__.py": "", "a.py": "X = 1\n"})
    first = code_zip.build(tmp_path / "one", package)
    again = code_zip.build(tmp_path / "two", package)
    assert (again.name, again.read_bytes()) == (first.name, first.read_bytes())

    (package / "a.py").write_text("X = 2\n")
    changed = code_zip.build(tmp_path / "one", package)

    assert changed.name != first.name
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == sorted([first.name, changed.name])
    with zipfile.ZipFile(changed) as archive:
        assert archive.read("pkg/a.py") == b"X = 2\n"


def test_a_zip_of_exactly_this_code_is_not_rebuilt(tmp_path):
    package = make_package(tmp_path, {"__init__.py": ""})
    built = code_zip.build(tmp_path / "out", package)
    built.write_bytes(built.read_bytes())  # new mtime, same content
    stamp = built.stat().st_mtime_ns

    assert code_zip.build(tmp_path / "out", package) == built
    assert built.stat().st_mtime_ns == stamp


def test_the_projects_zip_imports_the_job_without_the_project_on_the_path(tmp_path):
    built = code_zip.build(tmp_path)
    probe = ("import sys; sys.path = [p for p in sys.path if p and p != %r]; sys.path.insert(0, %r); "
             "import spark_jobs.transforms.cloudtrail.decode as m; print(m.__file__)") % (str(PROJECT_ROOT), str(built))

    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{built}/spark_jobs/transforms/cloudtrail/decode.py"


def test_the_command_prints_the_zips_path_and_takes_no_argument():
    built = subprocess.run([sys.executable, "-m", "spark_jobs.launch.code_zip"], cwd=PROJECT_ROOT, capture_output=True,
                           text=True, timeout=60)
    assert (built.returncode, built.stdout, built.stderr) == (0, f"{code_zip.build()}\n", "")
    refused = subprocess.run([sys.executable, "-m", "spark_jobs.launch.code_zip", "extra"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=60)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith("usage: python -m spark_jobs.launch.code_zip [-h]")

"""``python -m spark_jobs release add|list``: keep versions of the package where drivers can start from them.

Examples::

    python -m spark_jobs release add v2 --git v2
    python -m spark_jobs release add v2 --zip .spark/pyfiles/spark_jobs-<hash>.zip
    python -m spark_jobs release list

A release is ``$SPARK_JOBS_RELEASES/<name>/`` (default ``.spark/releases``): the ``spark_jobs`` package and its
``release.json`` (:mod:`spark_jobs.launch.releases`, docs/deploying.md).
"""

from __future__ import annotations

import argparse

HELP = "keep a version of the code (from git or a built zip) for rollouts, or list them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="keep the package of a git ref, a built zip or a folder as a version")
    add.add_argument("name", help="the version's name: a tag or short commit (letters, digits, . _ -)")
    add.add_argument("--git", metavar="REF", help="a tag, branch or commit of this repository")
    add.add_argument("--zip", metavar="FILE", help="a zip whose top folder is spark_jobs/ (python -m "
                     "spark_jobs.launch.code_zip builds one)")
    add.add_argument("--folder", metavar="DIR", help="a spark_jobs package folder")
    add.add_argument("--by", help="who made it (default: this user's login name)")
    actions.add_parser("list", help="the versions kept, with their code hashes")


def run(args: argparse.Namespace) -> int:
    from spark_jobs.launch.releases import add_release, list_releases, releases_root

    if args.action == "add":
        release = add_release(args.name, git_ref=args.git, zip_path=args.zip, package_dir=args.folder, by=args.by)
        print(f"release {release.name}: code {release.code} from {release.made_from}, in {release.folder}")
        return 0
    found = list_releases()
    print(f"{len(found)} release(s) in {releases_root()}")
    for release in found:
        print(f"  {release.name:<20} code {release.code}  {release.made_from}  ({release.made_at}, {release.by})")
    return 0

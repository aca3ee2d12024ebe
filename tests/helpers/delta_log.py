"""The tests' own reading of a Delta table's log (its JSON commits), beside what Delta and delta-rs report."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote


def merge_commits(table: Path) -> list[dict]:
    """Per MERGE commit of the table, oldest first: its app id and predicate (the test's own reading of the log)."""
    merges = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if info.get("operation") == "MERGE":
            app = next((a["txn"]["appId"] for a in actions if "txn" in a), None)
            merges.append({"app": app, "predicate": info["operationParameters"]["predicate"]})
    return merges


def batch_commits(table: Path) -> list[dict]:
    """The table's commits that carry a code version (a job's batches: docs/deploying.md), oldest first, each with
    ``timestamp`` (ms), ``version`` (the code version's name in its ``userMetadata``), ``batch`` (its ``txn``'s
    version: the micro-batch id), ``added`` and ``removed`` (the data files, relative to the table)."""
    commits = []
    for commit in sorted((Path(table) / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if not info.get("userMetadata"):
            continue
        commits.append({"timestamp": info["timestamp"], "version": json.loads(info["userMetadata"])["version"],
                        "batch": next((a["txn"]["version"] for a in actions if "txn" in a), None),
                        "added": [unquote(a["add"]["path"]) for a in actions if "add" in a],
                        "removed": [unquote(a["remove"]["path"]) for a in actions if "remove" in a]})
    return commits


def handover_gap(commits: list[dict], old: str, new: str) -> float:
    """Seconds without a commit at a handover: from version ``old``'s last commit to ``new``'s first."""
    last = max(c["timestamp"] for c in commits if c["version"] == old)
    first = min(c["timestamp"] for c in commits if c["version"] == new)
    return (first - last) / 1000


def rows_by_version(table: Path, columns: list[str]) -> dict[str, list[dict]]:
    """The table's ``columns`` of every row, by the code version of the batch commit that wrote its file (a table
    whose batches append files and never rewrite one: a removed file fails)."""
    import pyarrow.parquet as pq

    found: dict[str, list[dict]] = {}
    for commit in batch_commits(table):
        assert not commit["removed"], f"batch {commit['batch']} rewrote files: rows cannot be told by version"
        for path in commit["added"]:
            found.setdefault(commit["version"], []).extend(pq.read_table(Path(table) / path,
                                                                         columns=columns).to_pylist())
    return found

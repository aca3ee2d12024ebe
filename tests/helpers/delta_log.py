"""The tests' own reading of a Delta table's log (its JSON commits), beside what Delta and delta-rs report."""

from __future__ import annotations

import json
from pathlib import Path


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

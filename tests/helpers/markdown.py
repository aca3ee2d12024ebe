"""Markdown pages as GitHub renders them: the anchors of their headings (for the docs' link check and the alert rules'
runbook links)."""

from __future__ import annotations

import re
from pathlib import Path

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page, with GitHub's ``-1``, ``-2`` suffixes for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        name = slug(match.group(1))
        count = seen.get(name, 0)
        found.add(name if count == 0 else f"{name}-{count}")
        seen[name] = count + 1
    return found

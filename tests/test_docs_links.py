"""Every relative link of the README and the docs resolves: to a file of the project, and to a heading of it.

The README is the front page and the details live in ``docs/``, one topic per file, linked both ways;
a page renamed or a heading reworded must not leave a link that leads nowhere. Plain files, no JVM.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers.markdown import FENCE, anchors
from tests.helpers.project import PROJECT_ROOT
PAGES = sorted([PROJECT_ROOT / "README.md", PROJECT_ROOT / "plugins" / "README.md",
                *(PROJECT_ROOT / "docs").glob("*.md")])

INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _prose(text: str) -> str:
    """The text a reader sees as prose: code blocks, inline code and HTML comments taken out."""
    return INLINE_CODE.sub("", FENCE.sub("", HTML_COMMENT.sub("", text)))


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that lead to no file, or to no heading of the file."""
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor in {os.path.relpath(resolved, page.parent)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(PROJECT_ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_checker_sees_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A heading: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading-with-code) [file](missing.md) [anchor](there.md#nowhere)\n"
                    "`[in code](missing.md)` [web](https://example.org/x)\n```\n[fenced](missing.md)\n```\n")
    assert broken_links(page) == ["missing.md: no such file",
                                  "there.md#nowhere: no heading with that anchor in there.md"]


def test_the_readme_fits_on_a_screen():
    lines = len((PROJECT_ROOT / "README.md").read_text().splitlines())
    assert lines <= 300, f"README.md has {lines} lines: move the details into docs/"

"""Debian's headless Chromium for the page tests (Playwright drives it; pip's ``playwright`` brings only the driver)."""

from __future__ import annotations

import shutil

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    """The Chromium binary; the test fails naming the way out when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)", pytrace=False)
    return found

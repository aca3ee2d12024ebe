"""Debian's headless Chromium for the page tests (Playwright drives it; pip's ``playwright`` brings only the driver)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import Iterator

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    """The Chromium binary; the test fails naming the way out when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)", pytrace=False)
    return found


@contextmanager
def headless_browser() -> Iterator:
    """Debian's headless Chromium, driven by Playwright, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()

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
    """Debian's Chromium, headless, driven by Playwright; closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def simple_login(page, url: str, user: str, password: str) -> None:
    """Log ``user`` in through the simple auth manager's real login page of the Airflow at ``url`` (the health page's
    address first, so the login sends the browser back there)."""
    page.goto(url + "/plugin/streaming-health")  # the login form first
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/plugin/streaming-health", timeout=60_000)

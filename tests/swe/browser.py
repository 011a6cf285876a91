"""Debian's headless chromium, driven through its chromedriver by Selenium (WebDriver).

The flags keep a closed network from stalling the browser (no sync, no component updates,
no background requests) and give each browser a fresh profile.  A missing chromium skips
the tests on a workstation and fails them in CI (``SANDBOX_RUNTIME_CI=1``), where
``scripts/test.sh`` installs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


def _binaries() -> tuple[str, str] | None:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    if os.environ.get("SANDBOX_RUNTIME_CI") == "1":
        pytest.fail("chromium and chromium-driver are missing (scripts/test.sh installs them)")
    pytest.skip("chromium and chromium-driver are not installed")
    raise AssertionError  # unreachable: skip raises


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless chromium with a fresh profile in ``profile``, its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = _binaries()  # type: ignore[misc]
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield session
    finally:
        session.quit()


def console_problems(session: Any) -> list[str]:
    """The console's warnings and errors since the last call (a clean page has none)."""
    return [
        entry["message"]
        for entry in session.get_log("browser")
        if entry["level"] in ("SEVERE", "WARNING")
    ]

"""Debian's Chromium driven by Playwright: the one launch recipe every browser test uses.

Why the system browser: ``playwright install`` downloads a browser build from the network, which
CI machines and air-gapped clusters do not have; ``.ci/run`` installs Debian's ``chromium``
instead and Playwright drives it through ``executable_path``. Playwright only guarantees its own
bundled build, so the flags below keep the system one quiet and deterministic: no sandbox (CI
containers run as root), no GPU, and no background traffic (component updates, sync, field
trials) that would show up as network requests in the offline-report checks.

Each launch gets a new, empty profile (Playwright creates a temporary user-data-dir per
``launch()`` and removes it on close), so no cookie, cache or service worker carries over.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO

#: The browser ``.ci/run`` installs with apt-get (override with GPULIB_CHROMIUM for another build).
CHROMIUM = Path(os.environ.get("GPULIB_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
#: Screenshots of every check land here (gitignored); a failing check names its file.
SHOTS = REPO / "test-output" / "browser"
#: Tall enough that a notebook's outputs are on screen in one screenshot.
VIEWPORT = {"width": 1280, "height": 1600}


def chromium_or_skip() -> Path:
    """The Chromium binary, or skip the test saying why (the only reason a browser test may skip)."""
    if not CHROMIUM.is_file() or not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"Chromium not found at {CHROMIUM}: install Debian's `chromium` (apt-get install chromium, "
                    "as .ci/run does) or set GPULIB_CHROMIUM to a Chromium binary")
    return CHROMIUM


@contextmanager
def launched() -> Iterator:
    """A headless Chromium (Playwright ``Browser``) for the duration of the block."""
    binary = chromium_or_skip()
    from playwright.sync_api import sync_playwright  # the test extra; missing means a broken install: fail

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(binary), headless=True, args=ARGS, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


def block_network(page) -> list[str]:
    """Abort every request that is not ``file:``/``data:``/``blob:``; returns the list of attempts.

    An archived report must open months later on a laptop with no network: any attempt to reach
    http(s) (a CDN script, a font, a widget loader) ends up in the list, which the test asserts
    is empty, and is aborted so a figure that depends on it visibly fails to render.
    """
    attempted: list[str] = []

    def handle(route) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:")):
            route.continue_()
        else:
            attempted.append(url)
            route.abort("blockedbyclient")

    page.route("**/*", handle)
    return attempted


@contextmanager
def screenshot_check(page, name: str) -> Iterator[Path]:
    """Run a check, then save a PNG of the page as ``test-output/browser/<name>.png``.

    The screenshot is taken whether the check passes (for a person to look at) or fails; a
    failing check (an assertion or a Playwright timeout) is re-raised as an AssertionError that
    names the screenshot, so the CI log points straight at what the browser showed.
    """
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    try:
        yield path
    except Exception as exc:
        shot = _shoot(page, path)
        raise AssertionError(f"{name}: {type(exc).__name__}: {exc}\n{shot}") from exc
    shot = _shoot(page, path)
    if not path.is_file():
        raise AssertionError(f"{name}: {shot}")


def _shoot(page, path: Path) -> str:
    try:
        page.screenshot(path=str(path), timeout=30_000)
    except Exception as exc:  # a crashed page must not hide the original failure
        return f"screenshot FAILED ({type(exc).__name__}: {exc}); intended path: {path}"
    return f"screenshot: {path}"

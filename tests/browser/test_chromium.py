"""The browser harness itself: the skip rule, the network guard and failure screenshots can fail."""

from __future__ import annotations

import pytest

from tests.browser import chromium
from tests.browser.chromium import block_network, screenshot_check

pytestmark = pytest.mark.browser


def test_a_missing_chromium_skips_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(chromium, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(pytest.skip.Exception, match="Chromium not found at .*no-chromium.*apt-get install chromium"):
        chromium.chromium_or_skip()


def test_the_network_guard_records_and_aborts_http_requests(page, tmp_path):
    blocked = block_network(page)
    html = tmp_path / "page.html"
    html.write_text('<img src="http://127.0.0.1:9/logo.png"><script src="https://cdn.example.invalid/x.js"></script>'
                    "<p>offline</p>")
    page.goto(html.as_uri(), wait_until="load")
    assert page.locator("p").inner_text() == "offline"
    assert sorted(blocked) == ["http://127.0.0.1:9/logo.png", "https://cdn.example.invalid/x.js"]


def test_a_failing_check_names_its_screenshot(page):
    page.set_content("<h1>what the browser showed</h1>")
    with pytest.raises(AssertionError) as failure, screenshot_check(page, "selftest-failing-check"):
        assert page.locator("h1").inner_text() == "something else"
    path = chromium.SHOTS / "selftest-failing-check.png"
    assert f"screenshot: {path}" in str(failure.value) and "what the browser showed" in str(failure.value)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

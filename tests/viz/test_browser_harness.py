"""The browser harness itself, on tiny self-contained pages written to ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

from .browser import (
    READY_FLAG,
    console_errors,
    network_requests,
    not_blank,
    open_page,
    screenshot_png,
)

#: a page that paints 40 coloured stripes on a canvas, runs SCRIPT, then says it is ready
PAGE = """<!doctype html><meta charset="utf-8"><title>harness</title>
<canvas id="c" width="400" height="300"></canvas>
<script>
const ctx = document.getElementById("c").getContext("2d");
for (let i = 0; i < 40; i++) {
  ctx.fillStyle = "hsl(" + 9 * i + ", 80%, 50%)";
  ctx.fillRect(10 * i, 0, 10, 300);
}
SCRIPT
</script>
"""
READY = f"window.{READY_FLAG} = true;"


def write_page(tmp_path: Path, name: str, script: str = READY) -> Path:
    path = tmp_path / name
    path.write_text(PAGE.replace("SCRIPT", script))
    return path


def test_self_contained_page(browser, tmp_path):
    url = open_page(browser, write_page(tmp_path, "good.html"))
    assert url.startswith("file://") and url.endswith("/good.html")
    assert console_errors(browser) == []
    assert network_requests(browser) == []
    assert not_blank(screenshot_png(browser, tmp_path / "good.png"))


def test_console_error_is_seen(browser, tmp_path):
    open_page(browser, write_page(tmp_path, "bad.html", 'console.error("boom");' + READY))
    errors = console_errors(browser)
    assert len(errors) == 1 and "boom" in errors[0]
    assert console_errors(browser) == errors  # reading them does not lose them
    open_page(browser, write_page(tmp_path, "good.html"))  # a new page starts afresh
    assert console_errors(browser) == []


def test_network_requests_are_seen(browser, tmp_path):
    # Both fail (Chromium refuses port 9; no host name resolves) but both are attempted; the
    # page is ready once they have settled.
    script = (
        'fetch("http://127.0.0.1:9/x").catch(() => {}).finally(() => {'
        "  const img = new Image();"
        f"  img.onerror = img.onload = () => {{ {READY} }};"
        '  img.src = "http://example.invalid/a.png";'
        "});"
    )
    open_page(browser, write_page(tmp_path, "net.html", script))
    assert network_requests(browser) == ["http://127.0.0.1:9/x", "http://example.invalid/a.png"]


def test_blank_page_is_blank(browser, tmp_path):
    path = tmp_path / "blank.html"
    path.write_text(f"<!doctype html><script>{READY}</script>")
    open_page(browser, path)
    assert not not_blank(screenshot_png(browser, tmp_path / "blank.png"))

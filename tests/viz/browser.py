"""Drive a self-contained HTML page in headless Chromium (Selenium + Debian's chromedriver).

Nothing here downloads a browser: the driver is started from the system's ``chromedriver`` and
``chromium`` (given explicitly, so Selenium Manager never runs), and is skipped, or failed when
``ATTNLAB_REQUIRE_BROWSER=1`` (CI), where they are missing.

``start_browser()`` starts one; the ``browser`` fixture (``conftest.py``) is a session-wide one.
``open_page(driver, path)`` loads a local file and waits for the page to say it is ready
(``window.attnlabReady === true``); then ``console_errors``, ``network_requests`` and
``screenshot_png`` / ``not_blank`` check what it did, since that load.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

#: the page sets ``window[READY_FLAG] = true`` once it has decoded its data and drawn
READY_FLAG = "attnlabReady"
#: set to 1 (CI does) to fail, instead of skip, where the browser is missing
REQUIRE_ENV = "ATTNLAB_REQUIRE_BROWSER"
INSTALL = "apt-get install -y chromium chromium-driver && .venv/bin/pip install selenium"
WINDOW = (1400, 1000)

# Debian's names first; ATTNLAB_CHROMIUM / ATTNLAB_CHROMEDRIVER override.
_BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_DRIVERS = ("chromedriver",)


def _find(env: str, names: tuple[str, ...]) -> str | None:
    if os.environ.get(env):
        return shutil.which(os.environ[env])  # None unless an executable
    return next((p for p in map(shutil.which, names) if p), None)


def missing() -> str | None:
    """Why no browser can be started here (None when selenium, chromium and chromedriver are)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    if _find("ATTNLAB_CHROMIUM", _BROWSERS) is None:
        return "chromium is not installed"
    if _find("ATTNLAB_CHROMEDRIVER", _DRIVERS) is None:
        return "chromedriver is not installed"
    return None


def start_browser():
    """A headless Chromium WebDriver (1400x1000, no sandbox, no GPU) logging console + network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # should Selenium Manager ever run: no downloads
    options = webdriver.ChromeOptions()
    options.binary_location = _find("ATTNLAB_CHROMIUM", _BROWSERS)
    for arg in (
        "--headless",
        "--no-sandbox",  # tests run as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        # Resolve no host name but localhost: Chromium's own calls home (accounts, clients2,
        # www.google.com) go nowhere, and a page's requests are attempted (network_requests
        # sees them) but fail alike online and offline.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=_find("ATTNLAB_CHROMEDRIVER", _DRIVERS))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def _logs(driver, kind: str) -> list[dict]:
    """Every ``kind`` log entry since the last ``open_page`` (Selenium's get_log drains)."""
    if not hasattr(driver, "_attnlab_logs"):
        driver._attnlab_logs = {"browser": [], "performance": []}
    driver._attnlab_logs[kind].extend(driver.get_log(kind))
    return driver._attnlab_logs[kind]


def open_page(driver, path: str | os.PathLike, *, timeout: float = 10.0, ready: bool = True) -> str:
    """Load the local file ``path``; wait for ``document.readyState == "complete"`` and (with
    ``ready``) for ``window.attnlabReady === true``, up to ``timeout`` s each. Returns its URL.

    Raises AssertionError on a timeout, with the page's console errors.
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    for kind in ("browser", "performance"):  # forget the previous page's entries
        driver.get_log(kind)
    driver._attnlab_logs = {"browser": [], "performance": []}
    url = driver._attnlab_page = Path(path).resolve().as_uri()
    driver.get(url)
    waits = [("document.readyState", 'return document.readyState === "complete";')]
    if ready:
        waits.append((f"window.{READY_FLAG}", f"return window.{READY_FLAG} === true;"))
    for what, script in waits:
        try:
            WebDriverWait(driver, timeout, poll_frequency=0.05).until(
                lambda d, s=script: d.execute_script(s)
            )
        except TimeoutException:
            raise AssertionError(
                f"{url}: {what} not ready after {timeout} s; console errors: {console_errors(driver)}"
            ) from None
    return url


def console_errors(driver) -> list[str]:
    """The messages of the page's SEVERE console entries (console.error, uncaught exceptions,
    failed loads) since ``open_page``."""
    return [e["message"] for e in _logs(driver, "browser") if e["level"] == "SEVERE"]


def network_requests(driver) -> list[str]:
    """The URLs of every request the page made since ``open_page`` (in order, once each), but
    the page's own file:// URL and data:/blob:/about: URLs. Empty for a self-contained page."""
    page = getattr(driver, "_attnlab_page", driver.current_url).split("#")[0]
    urls: list[str] = []
    for entry in _logs(driver, "performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        url = message["params"]["request"]["url"]
        if url.split("#")[0] == page or url.startswith(("data:", "blob:", "about:")):
            continue
        if url not in urls:
            urls.append(url)
    return urls


def screenshot_png(driver, path: str | os.PathLike) -> Path:
    """Save a PNG screenshot of the window to ``path``; returns the path."""
    path = Path(path)
    if not driver.save_screenshot(str(path)):
        raise AssertionError(f"could not save a screenshot to {path}")
    return path


def not_blank(png_path: str | os.PathLike, *, few: int = 4) -> bool:
    """True when the image has more than ``few`` distinct colours (a blank page has 1)."""
    from PIL import Image

    with Image.open(png_path) as image:
        return image.convert("RGB").getcolors(maxcolors=few) is None  # None: more than ``few``

"""The ``browser`` fixture: one headless Chromium for the session (see ``browser.py``).

Without selenium, chromium or chromedriver the tests that use it skip, giving the install
command; with ``ATTNLAB_REQUIRE_BROWSER=1`` (as in CI) they fail instead.
"""

from __future__ import annotations

import os

import pytest

from . import browser as _browser


@pytest.fixture(scope="session")
def browser():
    """A session-wide headless Chromium WebDriver; load pages with ``browser.open_page``."""
    problem = _browser.missing()
    if problem is not None:
        message = f"{problem}; install the browser tests' tools with: {_browser.INSTALL}"
        if os.environ.get(_browser.REQUIRE_ENV) == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    driver = _browser.start_browser()
    yield driver
    driver.quit()

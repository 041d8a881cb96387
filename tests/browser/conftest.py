"""Browser tests: Debian's chromium driven by Playwright, never a downloaded browser.

Playwright's sync API keeps an event loop in the test thread while a browser is open, so the
browser lives only as long as this package's tests.
"""

import os

import pytest
from playwright.sync_api import expect

from tests.waiting import WAIT_SECONDS, patient

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = patient(WAIT_SECONDS) * 1000
"""How long a page action or an `expect` waits: a loaded machine's, as every wait of the suite."""
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="package")
def browser():
    """One headless Chromium for the package's tests (launched once: it takes seconds)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test
    # itself are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield instance
        instance.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE")


@pytest.fixture
def page(browser):
    """A page in a fresh browser context (no cookies from other tests)."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")

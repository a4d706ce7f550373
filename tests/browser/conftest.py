"""Browser tests: Playwright drives Debian's chromium (``make browser`` installs it; Playwright's
own browser download is never used) against pytest-django's ``live_server``. One browser serves
the whole package; each test gets a fresh context (no cookies) and a page, and saves
screenshots of the pages it visits under var/screenshots/ (ignored by git)."""

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import require

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
# Root in a container: no sandbox (it needs user namespaces), no GPU, /dev/shm is small, and
# nothing phones home (component updates, safe browsing) while the tests run.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--mute-audio",
]
TIMEOUT_MS = 10_000


@pytest.fixture(scope="package")
def browser() -> Iterator:
    require(
        os.access(CHROMIUM, os.X_OK),
        f"{CHROMIUM} is not installed (`make browser` installs Debian's chromium)",
    )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # require() skips, or fails in CI
        require(False, "the playwright package is missing (pip install -e '.[dev]')")
        raise
    # Playwright's sync API keeps an asyncio loop running in this thread, and Django then
    # refuses ORM calls here (factories, the test database flush). They are synchronous all
    # the same, so allow them while the browser lives; the live server's threads have no loop.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Factories hash and the login form checks passwords; a fast hasher saves seconds."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def page(browser, live_server) -> Iterator:
    """A page in a fresh context that asks for English, with relative URLs on the live server."""
    context = browser.new_context(
        base_url=live_server.url,
        locale="en-US",
        timezone_id="Asia/Shanghai",
        accept_downloads=True,
        viewport={"width": 1280, "height": 900},
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def screenshot(request, page) -> Callable[[str], Path]:
    """``screenshot("overview")`` saves var/screenshots/<test name>-overview.png (full page)."""
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def save(label: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{test_name}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save


@pytest.fixture
def log_in(page, live_server) -> Callable:
    """``log_in(user)`` through the login form, as a person would; lands on the overview."""

    def submit(user, password: str = "pw-for-tests") -> None:
        page.goto("/accounts/login/")
        page.fill("input[name=username]", user.get_username())
        page.fill("input[name=password]", password)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")

    return submit

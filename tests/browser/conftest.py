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


class Site:
    """A world built once for a test module, committed, with a live server of its own: see
    ``served_once``. ``page(width, language, user)`` is a page of a context at that width,
    logged in through the login form as ``user`` (a username, or None), asking for
    ``language``; one context per width and user, kept for the module."""

    def __init__(self, browser, url: str, world) -> None:  # type: ignore[no-untyped-def]
        self.browser, self.url, self.world = browser, url, world
        self._pages: dict[tuple[int, str | None], object] = {}

    def page(
        self, width: int, language: str, user: str | None = None, password: str = "pw-for-tests"
    ):  # type: ignore[no-untyped-def]
        from django.conf import settings

        page = self._pages.get((width, user))
        if page is None:
            context = self.browser.new_context(
                base_url=self.url,
                locale="en-US",
                timezone_id="Asia/Shanghai",
                accept_downloads=True,
                viewport={"width": width, "height": 900},
            )
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            if user is not None:
                page.goto("/accounts/login/")
                page.fill("input[name=username]", user)
                page.fill("input[name=password]", password)
                page.click("main button[type=submit]")
                page.wait_for_url(f"{self.url}/")
            self._pages[(width, user)] = page
        cookie = {"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": self.url}
        page.context.add_cookies([cookie])  # type: ignore[attr-defined]
        return page

    def close(self) -> None:
        for page in self._pages.values():
            page.context.close()  # type: ignore[attr-defined]


def served_once(
    browser, django_db_blocker, build: Callable[[], object], **overrides
) -> Iterator[Site]:  # type: ignore[no-untyped-def]
    """A module-scoped fixture wraps this (and asks for ``django_db_setup``): ``build()``
    runs once, committed, and a live server of the module's own serves it to every test of
    the module, with ``overrides`` as settings (MD5 passwords always). The tests take no
    database fixture, so pytest-django neither flushes the world after each one (as its
    ``live_server`` does) nor lets a test write through the ORM: they read the world
    through the browser and the values ``build()`` returned. At the end the database is
    flushed, as after a transactional test."""
    from django.core.management import call_command
    from django.test.utils import override_settings
    from pytest_django.live_server_helper import LiveServer

    fast = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with (
        django_db_blocker.unblock(),  # for the server's thread too, while the module runs
        override_settings(PASSWORD_HASHERS=fast, **overrides),
    ):
        try:
            world = build()
            server = LiveServer("localhost")
            server._live_server_modified_settings.enable()
            site = Site(browser, server.url, world)
            try:
                yield site
            finally:
                site.close()
                server._live_server_modified_settings.disable()
                server.stop()
        finally:
            call_command("flush", verbosity=0, interactive=False)

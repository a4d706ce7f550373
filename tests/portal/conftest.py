import pytest

from tests.portal.support import NOW


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    """The portal's clock (portal.selectors.now) reads NOW in every portal test."""
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)

"""What the portal's tests share: the pinned clock's instant, a logged-in client and an
active lease (tests/portal/conftest.py pins the portal's clock to NOW for every test)."""

from django.test import Client

from leases import services
from leases.choices import LeaseStatus
from tests.factories import at

NOW = at("2026-11-20 12:00")


def client_for(user, language: str = "en") -> Client:  # type: ignore[no-untyped-def]
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    return client


def active(lease):  # type: ignore[no-untyped-def]
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))

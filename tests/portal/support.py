"""What the portal's tests share: the pinned clock's instant, a logged-in client and an
active lease (tests/portal/conftest.py pins the portal's clock to NOW for every test)."""

from decimal import Decimal

from django.test import Client

from billing.choices import LineKind
from billing.models import Invoice, InvoiceLine
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


def october_invoice(*, tenant, lease) -> Invoice:  # type: ignore[no-untyped-def]
    """October 2026: node rent ¥45,000.00 and network fee ¥22,000.00, 6 % tax, ¥71,020.00."""
    invoice = Invoice.objects.create(
        tenant=tenant,
        period="2026-10",
        period_start=at("2026-10-01 00:00"),
        period_end=at("2026-11-01 00:00"),
        subtotal=Decimal("67000.00"),
        tax=Decimal("4020.00"),
        total=Decimal("71020.00"),
        tax_rate_percent=Decimal("6.00"),
    )
    for position, (kind, description, amount) in enumerate(
        [
            (LineKind.NODE_RENT, "2 nodes", Decimal("45000.00")),
            (LineKind.NETWORK_FEE, "network 100 Gbps", Decimal("22000.00")),
        ],
        start=1,
    ):
        month_line(invoice, position, lease, kind, description, amount)
    return invoice


def month_line(invoice, position, lease, kind, description, amount) -> InvoiceLine:  # type: ignore[no-untyped-def]
    """One line of a month at ``amount``, 6 % tax."""
    return InvoiceLine.objects.create(
        invoice=invoice,
        position=position,
        lease=lease,
        kind=kind,
        description=description,
        quantity=Decimal("1"),
        unit="month",
        unit_price=amount,
        amount=amount,
        tax_rate_percent=Decimal("6.00"),
    )

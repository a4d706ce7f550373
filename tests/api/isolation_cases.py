"""The registry the isolation proof (test_isolation.py) walks: one entry per named API
route under /api/v1/. A route that is missing here fails that test, so every new route
must say how to reach another tenant's object through it.

Each entry receives a conftest.Side (one tenant's world: tenant, members, lease, nodes,
runs, incident, invoice, token) and names that tenant's rows the route could expose."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.factories import at

Side = Any


@dataclass(frozen=True)
class ListOf:
    """A list route: the ids it must never show another tenant; optional filters that name
    that tenant's objects (they must match nothing)."""

    ids: Callable[[Side], set[int]]
    filters: Callable[[Side], list[dict[str, Any]]] = lambda side: []
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DetailOf:
    """A detail route: the URL kwargs of the tenant's object; every method of the route
    must answer 404 to another tenant's users."""

    kwargs: Callable[[Side], dict[str, Any]]
    query: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BodyOf:
    """A POST route about no object of its URL that names the tenant's objects in its
    body: another tenant's users get a refusal (403 for a role that may not write there,
    else a 400 naming ``field`` as for an id that does not exist), never what it answers
    about the object."""

    body: Callable[[Side], dict[str, Any]]
    field: str


@dataclass(frozen=True)
class NoRows:
    """A route that shows no tenant rows at all (the reason is required)."""

    reason: str


def pk(get: Callable[[Side], Any]) -> Callable[[Side], dict[str, Any]]:
    return lambda side: {"pk": get(side).pk}


IPERF3_OUTPUT = Path(__file__).parent.parent / "benchmarks/fixtures/iperf3/tcp_3.14_macos.json"


def evidence_of(side: Side) -> Any:
    """The tenant's own iperf3 measurement on its lease (made once per side)."""
    if getattr(side, "evidence", None) is None:
        from billing import evidence

        side.evidence = evidence.submit_evidence(
            lease=side.lease,
            user=side.members["admin"],
            tool="iperf3",
            raw_output=IPERF3_OUTPUT.read_text(),
            nodes=[node.hostname for node in side.nodes],
            measured_at=at("2026-11-05 10:00"),
            now=at("2026-11-10 10:00"),
        )
    return side.evidence


def dispute_of(side: Side) -> Any:
    """An open dispute of the tenant about a run, with its evidence (made once per side)."""
    if getattr(side, "dispute", None) is None:
        from billing import evidence

        side.dispute = evidence.open_dispute(
            lease=side.lease,
            user=side.members["admin"],
            reason="Our own job saturated the link during the probe.",
            probe_run=side.runs[0],
            evidence=[evidence_of(side)],
            now=at("2026-11-10 11:00"),
        )
    return side.dispute


def issued_invoice_of(side: Side) -> Any:
    """The tenant's November invoice, issued (by force: its runs are not ingested)."""
    from billing import services
    from billing.choices import InvoiceStatus

    if side.invoice.status == InvoiceStatus.DRAFT:
        side.invoice = services.issue_invoice(
            invoice=side.invoice, force=True, reason="test world", now=at("2026-12-02 00:00")
        )
    return side.invoice


def amendment_of(side: Side) -> Any:
    """A retroactive terms amendment of the tenant's lease, pending (made once per side)."""
    if getattr(side, "amendment", None) is None:
        from leases import services

        side.amendment = services.propose_retroactive_amendment(
            lease=side.lease,
            effective_from=at("2026-11-10 00:00"),
            changes={"credit_cap_percent": "40"},
            reason="Signed on the 10th, recorded late.",
        )
    return side.amendment


def key_of(side: Side) -> Any:
    """A signing key of the tenant, registered by its admin (made once per side). The
    side's dispute is opened first, unsigned: once the tenant holds a key, an unsigned
    dispute is refused."""
    if getattr(side, "key", None) is None:
        from tests.factories import register_tenant_key

        dispute_of(side)
        side.private_key, side.key = register_tenant_key(side.members["admin"], side.tenant)
    return side.key


def threshold_of(side: Side) -> Any:
    """A spend threshold of the tenant's leases together, set by its admin (made once per
    side)."""
    if getattr(side, "threshold", None) is None:
        from decimal import Decimal

        from billing import thresholds

        side.threshold = thresholds.create_threshold(
            tenant=side.tenant, user=side.members["admin"], kind="spend_cny", value=Decimal(500)
        )
    return side.threshold


def acceptance_run_of(side: Side) -> Any:
    """An acceptance run of the tenant's lease, over and in the chain (made once per side)."""
    if getattr(side, "acceptance_run", None) is None:
        from benchmarks.links import link_pending
        from tests.factories import make_run

        run = make_run(
            side.lease,
            slot=at("2026-11-01 08:00"),
            trigger="acceptance",
            measured_bps=98 * 10**9,
            nodes=side.nodes,
        )
        link_pending(lease_id=side.lease.pk)
        run.refresh_from_db()
        side.acceptance_run = run
    return side.acceptance_run


def public_key_text(side: Side) -> str:
    """A fresh Ed25519 public key, as a client sends it (base64 of its 32 bytes)."""
    from gpulease_verify import cosign

    return cosign.public_key_text(cosign.generate().public_key())


def credit_note_of(side: Side) -> Any:
    """A full reversal of the tenant's issued November invoice (made once per side)."""
    if getattr(side, "credit_note", None) is None:
        from billing import services

        side.credit_note = services.create_credit_note(
            invoice=issued_invoice_of(side), reason="Issued to the wrong entity."
        )
    return side.credit_note


def voucher_of(side: Side) -> Any:
    """A voucher of the tenant, issued with its November invoice (made once per side)."""
    if getattr(side, "voucher", None) is None:
        from billing.models import Voucher

        invoice = issued_invoice_of(side)
        side.voucher = Voucher.objects.create(
            tenant=side.tenant,
            lease=side.lease,
            source_invoice=invoice,
            number=f"GL-VC-2026-{side.tenant.pk:06d}",
            period="2026-11",
            amount="100.00",
            issued_at=invoice.issued_at,
            validity_months=12,
            expires_at=at("2027-12-02 00:00"),
            description="SLA credit",
        )
    return side.voucher


CASES: dict[str, ListOf | DetailOf | NoRows] = {
    "api:api-root": NoRows("the router's index lists the collections' URLs"),
    "api:tenant-list": ListOf(lambda side: {side.tenant.pk}),
    "api:tenant-detail": DetailOf(pk(lambda side: side.tenant)),
    "api:site-list": ListOf(lambda side: {side.nodes[0].leaf_switch.fabric.site_id}),
    "api:site-detail": DetailOf(pk(lambda side: side.nodes[0].leaf_switch.fabric.site)),
    "api:fabric-list": ListOf(
        lambda side: {side.nodes[0].leaf_switch.fabric_id},
        filters=lambda side: [{"site": side.nodes[0].leaf_switch.fabric.site.code}],
    ),
    "api:fabric-detail": DetailOf(pk(lambda side: side.nodes[0].leaf_switch.fabric)),
    "api:node-list": ListOf(
        lambda side: {node.pk for node in side.nodes},
        filters=lambda side: [{"lease": side.lease.pk}],
    ),
    "api:node-detail": DetailOf(pk(lambda side: side.nodes[0])),
    "api:lease-list": ListOf(
        lambda side: {side.lease.pk},
        filters=lambda side: [{"tenant": side.tenant.slug}, {"reference": side.lease.reference}],
    ),
    "api:lease-detail": DetailOf(pk(lambda side: side.lease)),
    "api:lease-activate": DetailOf(pk(lambda side: side.lease)),
    "api:lease-end": DetailOf(pk(lambda side: side.lease)),
    "api:termsamendment-list": ListOf(lambda side: {amendment_of(side).pk}),
    "api:termsamendment-detail": DetailOf(pk(amendment_of)),
    "api:termsamendment-acknowledge": DetailOf(pk(amendment_of), body={"reason": "Agreed."}),
    "api:lease-cancel": DetailOf(pk(lambda side: side.lease)),
    "api:lease-run-now": DetailOf(pk(lambda side: side.lease), body={"kinds": ["link"]}),
    "api:lease-sla": DetailOf(pk(lambda side: side.lease), query={"period": "2026-11"}),
    "api:lease-probe-tax": DetailOf(pk(lambda side: side.lease), query={"period": "2026-11"}),
    "api:lease-usage": DetailOf(pk(lambda side: side.lease), query={"period": "2026-11"}),
    "api:proberun-list": ListOf(
        lambda side: {run.pk for run in side.runs},
        filters=lambda side: [
            {"lease": side.lease.pk},
            {"node": side.nodes[0].pk},
            {"batch": str(side.runs[0].batch)},
        ],
    ),
    "api:proberun-detail": DetailOf(pk(lambda side: side.runs[0])),
    "api:proberun-raw": DetailOf(pk(lambda side: side.runs[0])),
    "api:incident-list": ListOf(
        lambda side: {side.incident.pk}, filters=lambda side: [{"lease": side.lease.pk}]
    ),
    "api:incident-detail": DetailOf(pk(lambda side: side.incident)),
    "api:incident-acknowledge": DetailOf(pk(lambda side: side.incident), body={"note": "on it"}),
    "api:incident-mitigate": DetailOf(pk(lambda side: side.incident), body={"note": "moved"}),
    "api:invoice-list": ListOf(
        lambda side: {side.invoice.pk}, filters=lambda side: [{"tenant": side.tenant.slug}]
    ),
    "api:invoice-detail": DetailOf(pk(lambda side: side.invoice)),
    "api:invoice-pdf": DetailOf(pk(lambda side: side.invoice)),
    "api:invoice-xlsx": DetailOf(pk(lambda side: side.invoice)),
    "api:invoice-einvoice": DetailOf(pk(issued_invoice_of)),
    "api:invoice-issue": DetailOf(
        pk(lambda side: side.invoice), body={"force": True, "reason": "late runs"}
    ),
    "api:invoice-void": DetailOf(pk(issued_invoice_of), body={"reason": "wrong buyer"}),
    "api:invoice-mark-paid": DetailOf(pk(issued_invoice_of)),
    "api:invoice-credit-notes": DetailOf(pk(issued_invoice_of), body={"reason": "reversal"}),
    "api:creditnote-list": ListOf(
        lambda side: {credit_note_of(side).pk},
        filters=lambda side: [{"tenant": side.tenant.slug}, {"invoice": side.invoice.pk}],
    ),
    "api:creditnote-detail": DetailOf(pk(credit_note_of)),
    "api:creditnote-einvoice": DetailOf(pk(credit_note_of)),
    "api:voucher-list": ListOf(
        lambda side: {voucher_of(side).pk},
        filters=lambda side: [
            {"tenant": side.tenant.slug},
            {"lease": side.lease.pk},
            {"source_invoice": issued_invoice_of(side).pk},
        ],
    ),
    "api:voucher-detail": DetailOf(pk(voucher_of)),
    "api:apitoken-list": ListOf(
        lambda side: {side.token.pk}, filters=lambda side: [{"prefix": side.token.prefix}]
    ),
    "api:apitoken-detail": DetailOf(pk(lambda side: side.token)),
    "api:apitoken-revoke": DetailOf(pk(lambda side: side.token)),
    # Audit bundle, evidence and disputes (api/audit_urls.py).
    "api:audit-public-key": NoRows("the provider's public signing key, the same for all"),
    "api:alertmanager-alerts": NoRows(
        "Alertmanager's intake (monitoring.views): it answers counts, never tenant rows, "
        "and only to ALERTMANAGER_TOKEN"
    ),
    "api:lease-audit": DetailOf(pk(lambda side: side.lease), query={"period": "2026-11"}),
    "api:lease-checkpoints": DetailOf(pk(lambda side: side.lease)),
    "api:lease-evidence": DetailOf(
        pk(lambda side: side.lease),
        body={"tool": "iperf3", "raw_output": "{}", "nodes": []},
    ),
    "api:evidence-detail": DetailOf(pk(evidence_of)),
    "api:dispute-list": ListOf(
        lambda side: {dispute_of(side).pk}, filters=lambda side: [{"lease": side.lease.pk}]
    ),
    "api:dispute-detail": DetailOf(pk(dispute_of)),
    "api:dispute-accept": DetailOf(pk(dispute_of), body={"credit": "100.00", "reason": "ok"}),
    "api:dispute-reject": DetailOf(pk(dispute_of), body={"reason": "no"}),
    "api:dispute-signing-content": BodyOf(
        lambda side: {"lease": side.lease.pk, "reason": "Ours.", "probe_run": side.runs[0].pk},
        field="lease",
    ),
    # Tenant signing keys and the contents the tenant signs (api/views_cosign.py).
    "api:tenantkey-list": ListOf(lambda side: {key_of(side).pk}),
    "api:tenantkey-detail": DetailOf(pk(key_of)),
    "api:tenantkey-revoke": DetailOf(pk(key_of)),
    "api:tenantkey-signing-content": BodyOf(
        lambda side: {"tenant": side.tenant.slug, "public_key": public_key_text(side)},
        field="tenant",
    ),
    # The tenant's usage and spend thresholds (api/views_thresholds.py).
    "api:threshold-list": ListOf(lambda side: {threshold_of(side).pk}),
    "api:threshold-detail": DetailOf(pk(threshold_of), body={"value": "1.00"}),
    "api:termsamendment-signing-content": DetailOf(pk(amendment_of), body={"reason": "Agreed."}),
    "api:lease-acceptance-signing-content": DetailOf(pk(lambda side: side.lease), body={"run": 1}),
    "api:lease-acceptance-sign-off": DetailOf(pk(lambda side: side.lease), body={"run": 1}),
}

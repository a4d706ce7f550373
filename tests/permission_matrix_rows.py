"""The expected rows of the permission matrix (tests/test_permission_matrix.py): for every
(route name, HTTP method) in the URLconf, the status each caller gets on tenant alpha's
objects.

Callers, in the order of every row (the column heads above each table):

- stf: provider staff; adm, vwr, aud: alpha's admin, viewer and auditor;
- two: viewer in alpha and admin in beta, asking for alpha's objects;
- out: a user of no tenant; ina: an alpha admin whose account is deactivated;
- ano: nobody logged in;
- after the "|" (API rows only): Bearer tokens of alpha's admin with the scopes {read} (rd),
  {write} (wr), {audit} (aud) and {read, write, audit} (all).

A status is a number, or "login" for a 302 to the login page (a plain 302 is any other
redirect). Session callers log in through the session cookie, as the portal does.

A row's ``kwargs`` may build the object it names (a draft lease, a viewer's token); it runs
once per row. A row's ``body`` runs once per caller, so that each successful write gets a
fresh object and leaves nothing the next caller would trip over."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from accounts import services as tokens
from accounts.choices import Role
from leases.choices import LeaseStatus
from tests.api.isolation_cases import (
    acceptance_run_of,
    credit_note_of,
    dispute_of,
    evidence_of,
    issued_invoice_of,
    key_of,
    public_key_text,
    threshold_of,
    voucher_of,
)
from tests.factories import NodeFactory, at, make_lease, make_run

World = Any

SESSION_CALLERS = ("staff", "admin", "viewer", "auditor", "two", "outsider", "inactive", "anon")
TOKEN_CALLERS = ("read", "write", "audit", "all")
API_CALLERS = SESSION_CALLERS + TOKEN_CALLERS
TOKEN_SCOPES = {
    "read": ["read"],
    "write": ["write"],
    "audit": ["audit"],
    "all": ["read", "write", "audit"],
}
LOGIN = "login"

IPERF3 = (Path(__file__).parent / "benchmarks/fixtures/iperf3/tcp_3.14_macos.json").read_text()


def _none(world: World) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Row:
    expect: str  # one status per caller; "|" before the token callers is decoration
    kwargs: Callable[[World], dict[str, Any]] = _none
    body: Callable[[World], dict[str, Any]] = _none
    query: dict[str, str] = field(default_factory=dict)

    def expected(self, callers: tuple[str, ...]) -> dict[str, int | str]:
        cells = [c if c == LOGIN else int(c) for c in self.expect.replace("|", " ").split()]
        assert len(cells) == len(callers), f"{self.expect!r} needs {len(callers)} statuses"
        return dict(zip(callers, cells, strict=True))


# --- what the rows name -------------------------------------------------------------------


def lease(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk}


def lease_incident(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk, "incident_pk": world.alpha.incident.pk}


def throughput_csv(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk, "chart": "throughput"}


def site(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.nodes[0].leaf_switch.fabric.site_id}


def fabric(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.nodes[0].leaf_switch.fabric_id}


def draft_lease(world: World) -> dict[str, Any]:
    """A draft lease of alpha on a node of its own, ready to activate or cancel."""
    node = NodeFactory(leaf_switch=world.alpha.nodes[0].leaf_switch, hostname="alpha-n3")
    draft = make_lease(tenant=world.alpha.tenant, nodes=[node], reference="ALPHA-DRAFT")
    assert draft.status == LeaseStatus.DRAFT
    return {"pk": draft.pk}


def viewer_token(world: World) -> dict[str, Any]:
    """A token of alpha's viewer: its owner, alpha's admin (who manages the viewer) and
    staff may see and revoke it; the two-tenant user, a viewer in alpha, may not."""
    issued = tokens.issue_token(user=world.alpha.members[Role.VIEWER], scopes=["read"], name="v")
    return {"pk": issued.token.pk}


def new_site(world: World) -> dict[str, Any]:
    return {"name": "Foshan", "code": "fs-1", "city": "Foshan"}


def new_fabric(world: World) -> dict[str, Any]:
    return {
        "site": world.alpha.nodes[0].leaf_switch.fabric.site.code,
        "name": "fs-roce-2",
        "technology": "roce",
        "port_speed_gbps": 100,
        "topology": "leaf_spine",
        "oversubscription": "2.00",
    }


def new_lease(world: World) -> dict[str, Any]:
    return {
        "tenant": "alpha",
        "reference": "ALPHA-NEW",
        "starts_at": "2027-01-01T00:00:00+08:00",
        "terms": {
            "contracted_bandwidth_gbps": "100",
            "technology": "roce",
            "billing_mode": "monthly",
            "node_rent_per_month": "45000.00",
        },
    }


def evidence_body(world: World) -> dict[str, Any]:
    return {
        "tool": "iperf3",
        "raw_output": IPERF3,
        "nodes": [node.hostname for node in world.alpha.nodes],
        "measured_at": "2026-11-05T10:00:00+08:00",
    }


_slots = itertools.count()


def dispute_body(world: World) -> dict[str, Any]:
    """A dispute about a run of its own, so each caller's dispute is a new one."""
    run = make_run(
        world.alpha.lease,
        slot=at("2026-11-03 00:00") + timedelta(hours=next(_slots)),
        nodes=world.alpha.nodes,
        measured_bps=40 * 10**9,
        verdict="fail",
        target="alpha-n1>alpha-n2",
    )
    return {
        "lease": world.alpha.lease.pk,
        "reason": "Our job shared the link.",
        "probe_run": run.pk,
    }


def portal_evidence_form(world: World) -> dict[str, Any]:
    return {
        "tool": "iperf3",
        "nodes": [node.hostname for node in world.alpha.nodes],
        "raw_output": IPERF3,
    }


def audit_month(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk, "period": "2026-11"}


def checkpointed_lease(world: World) -> dict[str, Any]:
    """Alpha's lease with a signed chain checkpoint (October 2026) to download."""
    from billing import checkpoints

    checkpoints.create_checkpoint(lease=world.alpha.lease, period="2026-10")
    return {"pk": world.alpha.lease.pk}


def page_evidence(world: World) -> dict[str, Any]:
    return {"pk": world.alpha.lease.pk, "evidence_pk": evidence_of(world.alpha).pk}


def retroactive_changes(world: World) -> dict[str, Any]:
    return {
        "lease": world.alpha.lease.pk,
        "effective_from": "2026-11-10T00:00:00+08:00",
        "changes": {"credit_cap_percent": "40"},
        "reason": "Signed on the 10th, recorded late.",
    }


def pending_amendment(world: World) -> dict[str, Any]:
    """A retroactive amendment of alpha's lease, waiting for alpha's admin."""
    from leases import services

    amendment = services.propose_retroactive_amendment(
        lease=world.alpha.lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="Signed on the 10th, recorded late.",
    )
    return {"pk": amendment.pk}


def acknowledgement_body(world: World) -> dict[str, Any]:
    """Each caller finds alpha's amendment pending again: an acknowledged one is reopened
    and the terms version it made removed (test-only; nothing in the product does this)."""
    from leases.models import LeaseTerms, TermsAmendment

    done = TermsAmendment.objects.filter(
        lease=world.alpha.lease, status=TermsAmendment.Status.ACKNOWLEDGED
    )
    made = list(done.values_list("terms", flat=True))
    done.update(status=TermsAmendment.Status.PENDING, terms=None)
    LeaseTerms.objects.filter(pk__in=made).delete()
    return {"reason": "We agreed."}


def key_registration(world: World) -> dict[str, Any]:
    """A fresh key of alpha, its registration signed by the key as alpha's admin sends it
    (the callers that get past the role check are alpha's admin and its tokens)."""
    from django.utils import timezone

    from gpulease_verify import cosign as rules
    from leases import cosign

    private = rules.generate()
    public = rules.public_key_text(private.public_key())
    content = cosign.registration_content(
        tenant=world.alpha.tenant,
        user=world.alpha.members[Role.ADMIN],
        public_key=public,
        at=timezone.now(),
    )
    return {
        "tenant": "alpha",
        "public_key": public,
        "signed_at": content["at"],
        "signature": rules.sign(private, content),
    }


def reinstated_key(world: World) -> dict[str, Any]:
    """Each caller finds alpha's key valid again (test-only; nothing in the product
    un-revokes a key). No body."""
    from leases.models import TenantKey

    TenantKey.objects.filter(tenant=world.alpha.tenant).update(
        revoked_at=None, revoked_by=None, revoked_by_username=""
    )
    return {}


def restored_threshold(world: World) -> dict[str, Any]:
    """Each caller finds alpha's threshold there again (the one a caller before deleted,
    with its id). No body."""
    from billing.models import Threshold

    threshold = threshold_of(world.alpha)
    if not Threshold.objects.filter(pk=threshold.pk).exists():
        threshold.save(force_insert=True)
    return {}


def portal_key_form(world: World) -> dict[str, Any]:
    """The keys page's first step for alpha: show what to sign for a fresh public key."""
    return {"tenant": "alpha", "action": "prepare", "alpha-public_key": public_key_text(world)}


def confirmed_revocation(world: World) -> dict[str, Any]:
    reinstated_key(world)
    return {"confirm": "yes"}


def portal_settings_form(world: World) -> dict[str, Any]:
    """The settings page's contacts form for alpha."""
    return {
        "tenant": "alpha",
        "action": "contacts",
        "contact_name": "王工",
        "contact_email": "noc@alpha.example.cn",
        "contact_phone": "+86 755 8888 0000",
    }


def portal_acknowledgement(world: World) -> dict[str, Any]:
    acknowledgement_body(world)
    return {"reason": "We agreed.", "action": "acknowledge"}


def acceptance(world: World) -> dict[str, Any]:
    return {"run": acceptance_run_of(world.alpha).pk}


def pk_of(get: Callable[[Any], Any]) -> Callable[[World], dict[str, Any]]:
    return lambda world: {"pk": get(world.alpha).pk}


PERIOD = {"period": "2026-11"}

# --- the API: /api/v1/ --------------------------------------------------------------------

# fmt: off
API_ROWS: dict[tuple[str, str], Row] = {
    #                                        stf adm vwr aud two out ina ano | rd  wr  aud all
    ("api:api-root", "get"):            Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    # The signing key is public: anybody, even with a token that lacks every scope.
    ("api:audit-public-key", "get"):    Row("200 200 200 200 200 200 200 200 | 200 200 200 200"),
    # Alertmanager's intake takes ALERTMANAGER_TOKEN only (unset here): no session, no API token.
    ("api:alertmanager-alerts", "post"): Row("401 401 401 401 401 401 401 401 | 401 401 401 401"),
    ("api:tenant-list", "get"):         Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:tenant-detail", "get"):       Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.tenant)),
    ("api:site-list", "get"):           Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:site-list", "post"):          Row("201 403 403 403 403 403 401 401 | 403 403 403 403",
                                            body=new_site),
    ("api:site-detail", "get"):         Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            site),
    ("api:site-detail", "patch"):       Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            site, body=lambda w: {"city": "Shenzhen"}),
    ("api:fabric-list", "get"):         Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:fabric-list", "post"):        Row("201 403 403 403 403 403 401 401 | 403 403 403 403",
                                            body=new_fabric),
    ("api:fabric-detail", "get"):       Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            fabric),
    ("api:fabric-detail", "patch"):     Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            fabric, body=lambda w: {"adaptive_routing": True}),
    ("api:node-list", "get"):           Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:node-detail", "get"):         Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.nodes[0])),
    ("api:lease-list", "get"):          Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:lease-list", "post"):         Row("201 403 403 403 403 403 401 401 | 403 403 403 403",
                                            body=new_lease),
    ("api:lease-detail", "get"):        Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            lease),
    ("api:lease-activate", "post"):     Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            draft_lease),
    ("api:lease-cancel", "post"):       Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            draft_lease),
    ("api:lease-end", "post"):          Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            lease),
    ("api:termsamendment-list", "get"): Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:termsamendment-list", "post"): Row("201 403 403 403 403 403 401 401 | 403 403 403 403",
                                            body=retroactive_changes),
    ("api:termsamendment-detail", "get"): Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pending_amendment),
    # Only a tenant admin acknowledges: staff pass the route and are refused by the service.
    ("api:termsamendment-acknowledge", "post"): Row(
        "403 200 403 403 403 404 401 401 | 403 200 403 200",
        pending_amendment, body=acknowledgement_body),
    # Only alpha's admin (not the two-tenant user, admin of beta only) asks alpha's probes.
    ("api:lease-run-now", "post"):      Row("202 202 403 403 403 404 401 401 | 403 202 403 202",
                                            lease, body=lambda w: {"kinds": ["link"]}),
    ("api:lease-sla", "get"):           Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            lease, query=PERIOD),
    ("api:lease-probe-tax", "get"):     Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            lease, query=PERIOD),
    ("api:lease-usage", "get"):         Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            lease, query=PERIOD),
    ("api:lease-audit", "get"):         Row("200 200 403 200 403 404 401 401 | 403 403 200 200",
                                            lease, query=PERIOD),
    ("api:lease-checkpoints", "get"):   Row("200 200 403 200 403 404 401 401 | 403 403 200 200",
                                            lease),
    ("api:lease-evidence", "get"):      Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            lease),
    ("api:lease-evidence", "post"):     Row("201 201 403 403 403 404 401 401 | 403 201 403 201",
                                            lease, body=evidence_body),
    ("api:evidence-detail", "get"):     Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(evidence_of)),
    ("api:proberun-list", "get"):       Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:proberun-detail", "get"):     Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.runs[0])),
    ("api:proberun-raw", "get"):        Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.runs[0])),
    ("api:incident-list", "get"):       Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:incident-detail", "get"):     Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.incident)),
    # Provider staff state they acknowledged or mitigated a fault (incidents.repair).
    ("api:incident-acknowledge", "post"): Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(lambda side: side.incident),
                                            body=lambda w: {"note": "on it"}),
    ("api:incident-mitigate", "post"):  Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(lambda side: side.incident),
                                            body=lambda w: {"note": "moved"}),
    ("api:invoice-list", "get"):        Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:invoice-detail", "get"):      Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.invoice)),
    ("api:invoice-pdf", "get"):         Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.invoice)),
    ("api:invoice-xlsx", "get"):        Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(lambda side: side.invoice)),
    ("api:invoice-einvoice", "get"):    Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(issued_invoice_of)),
    # Provider staff only. The matrix's clock is 2026-11-20: November cannot be issued yet,
    # so staff pass every check but the service's (409).
    ("api:invoice-issue", "post"):      Row("409 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(lambda side: side.invoice),
                                            body=lambda w: {"force": True, "reason": "late"}),
    ("api:invoice-void", "post"):       Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(issued_invoice_of),
                                            body=lambda w: {"reason": "wrong buyer"}),
    # The invoice is issued on 2026-12-02, after the matrix's clock: a payment dated today
    # would precede it, so staff pass every check but the service's (400).
    ("api:invoice-mark-paid", "post"):  Row("400 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(issued_invoice_of)),
    ("api:invoice-credit-notes", "post"): Row("201 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(issued_invoice_of),
                                            body=lambda w: {"reason": "reversal"}),
    ("api:creditnote-list", "get"):     Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:creditnote-detail", "get"):   Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(credit_note_of)),
    ("api:creditnote-einvoice", "get"): Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(credit_note_of)),
    ("api:voucher-list", "get"):        Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:voucher-detail", "get"):      Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(voucher_of)),
    ("api:dispute-list", "get"):        Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    # The two-tenant user passes the route (admin of beta) and is refused by the service:
    # on alpha's lease they are a viewer. Only the tenant opens a dispute: staff pass the
    # route and are refused by the service (they decide disputes, issue 30).
    ("api:dispute-list", "post"):       Row("403 201 403 403 403 403 401 401 | 403 201 403 201",
                                            body=dispute_body),
    ("api:dispute-detail", "get"):      Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(dispute_of)),
    ("api:dispute-accept", "post"):     Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(dispute_of),
                                            body=lambda w: {"reason": "Confirmed.",
                                                            "credit_cny": "100.00"}),
    ("api:dispute-reject", "post"):     Row("200 403 403 403 403 404 401 401 | 403 403 403 403",
                                            pk_of(dispute_of), body=lambda w: {"reason": "No."}),
    # Only a tenant admin is shown what it signs: staff pass the route and are refused by
    # the service, like the two-tenant user (admin of beta, a viewer of alpha).
    ("api:dispute-signing-content", "post"): Row(
        "403 200 403 403 403 403 401 401 | 403 200 403 200", body=dispute_body),
    ("api:termsamendment-signing-content", "post"): Row(
        "403 200 403 403 403 404 401 401 | 403 200 403 200",
        pending_amendment, body=lambda w: {"reason": "We agreed."}),
    ("api:lease-acceptance-signing-content", "post"): Row(
        "403 200 403 403 403 404 401 401 | 403 200 403 200", lease, body=acceptance),
    # Unsigned: alpha holds no key in this world.
    ("api:lease-acceptance-sign-off", "post"): Row(
        "403 201 403 403 403 404 401 401 | 403 201 403 201", lease, body=acceptance),
    ("api:tenantkey-list", "get"):      Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:tenantkey-list", "post"):     Row("403 201 403 403 403 403 401 401 | 403 201 403 201",
                                            body=key_registration),
    ("api:tenantkey-signing-content", "post"): Row(
        "403 200 403 403 403 403 401 401 | 403 200 403 200",
        body=lambda w: {"tenant": "alpha", "public_key": public_key_text(w.alpha)}),
    ("api:tenantkey-detail", "get"):    Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(key_of)),
    ("api:tenantkey-revoke", "post"):   Row("403 200 403 403 403 404 401 401 | 403 200 403 200",
                                            pk_of(key_of), body=reinstated_key),
    # A tenant admin's own statements: staff pass the route and are refused by the service.
    ("api:threshold-list", "get"):      Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    ("api:threshold-list", "post"):     Row("403 201 403 403 403 403 401 401 | 403 201 403 201",
                                            body=lambda w: {"tenant": "alpha",
                                                            "kind": "spend_cny",
                                                            "value": "100.00"}),
    ("api:threshold-detail", "get"):    Row("200 200 200 200 200 404 401 401 | 200 403 403 200",
                                            pk_of(threshold_of)),
    ("api:threshold-detail", "patch"):  Row("403 200 403 403 403 404 401 401 | 403 200 403 200",
                                            pk_of(threshold_of),
                                            body=lambda w: {**restored_threshold(w),
                                                            "value": "250.00"}),
    ("api:threshold-detail", "delete"): Row("403 204 403 403 403 404 401 401 | 403 204 403 204",
                                            pk_of(threshold_of), body=restored_threshold),
    ("api:apitoken-list", "get"):       Row("200 200 200 200 200 200 401 401 | 200 403 403 200"),
    # A write-only token cannot mint a read token (400: a token never gets more than the
    # token that issued it holds). A member of two tenants must name the tenant its token
    # acts for (400: the body names none).
    ("api:apitoken-list", "post"):      Row("201 201 403 403 400 403 401 401 | 403 400 403 201",
                                            body=lambda w: {"scopes": ["read"]}),
    ("api:apitoken-detail", "get"):     Row("200 200 200 404 404 404 401 401 | 200 403 403 200",
                                            viewer_token),
    ("api:apitoken-revoke", "post"):    Row("200 200 200 404 404 404 401 401 | 403 200 403 200",
                                            viewer_token),
}

# --- pages: the portal, provider pages and the site's own routes -----------------------------

PAGE_ROWS: dict[tuple[str, str], Row] = {
    #                                        stf adm vwr aud two out ina ano
    ("set_language", "get"):            Row("302 302 302 302 302 302 302 302"),
    ("set_language", "post"):           Row("302 302 302 302 302 302 302 302",
                                            body=lambda w: {"language": "zh-hans", "next": "/"}),
    ("health", "get"):                  Row("200 200 200 200 200 200 200 200"),
    # To the site's SVG icon, for everyone.
    ("favicon", "get"):                 Row("301 301 301 301 301 301 301 301"),
    # Open to all alike; the test database, cache and broker answer (test_health.py).
    ("ready", "get"):                   Row("200 200 200 200 200 200 200 200"),
    # METRICS_TOKEN and METRICS_ALLOWED_NETWORKS unset, DEBUG off: nobody (monitoring.views).
    ("metrics", "get"):                 Row("403 403 403 403 403 403 403 403"),
    ("portal:login", "get"):            Row("200 200 200 200 200 200 200 200"),
    ("portal:login", "post"):           Row("200 200 200 200 200 200 200 200"),
    ("portal:login", "put"):            Row("200 200 200 200 200 200 200 200"),
    ("portal:logout", "post"):          Row("login login login login login login login login"),
    ("portal:overview", "get"):         Row("200 200 200 200 200 200 login login"),
    ("portal:overview", "post"):        Row("200 200 200 200 200 200 login login"),
    ("portal:lease", "get"):            Row("200 200 200 200 200 404 login login", lease),
    ("portal:lease", "post"):           Row("200 200 200 200 200 404 login login", lease),
    # An incident of the lease, and a chart's data as CSV: whoever sees the lease.
    ("portal:incident", "get"):         Row("200 200 200 200 200 404 login login", lease_incident),
    ("portal:incident", "post"):        Row("200 200 200 200 200 404 login login", lease_incident),
    ("portal:chart-csv", "get"):        Row("200 200 200 200 200 404 login login", throughput_csv),
    ("portal:chart-csv", "post"):       Row("200 200 200 200 200 404 login login", throughput_csv),
    ("portal:lease-sla", "get"):        Row("200 200 200 200 200 404 login login", lease),
    ("portal:lease-sla", "post"):       Row("200 200 200 200 200 404 login login", lease),
    # The month's signed audit bundle and the chain checkpoint: as the API's audit routes,
    # for staff, the tenant's admin and auditor (the two-tenant user is a viewer of alpha).
    ("portal:lease-audit", "get"):      Row("200 200 403 200 403 404 login login", audit_month),
    ("portal:lease-checkpoint", "get"): Row("200 200 403 200 403 404 login login",
                                            checkpointed_lease),
    # Viewers and auditors read the guide with a 403: only an admin of alpha submits.
    ("portal:evidence-upload", "get"):  Row("200 200 403 403 403 404 login login", lease),
    ("portal:evidence-upload", "post"): Row("302 302 403 403 403 404 login login", lease,
                                            body=portal_evidence_form),
    ("portal:evidence", "get"):         Row("200 200 200 200 200 404 login login", page_evidence),
    ("portal:evidence", "post"):        Row("200 200 200 200 200 404 login login", page_evidence),
    ("portal:tokens", "get"):           Row("200 200 200 200 200 200 login login"),
    # An auditor creates tokens of their own (read and audit scopes); a viewer does not; a
    # member of two tenants must choose the tenant (400: the form names none).
    ("portal:tokens", "post"):          Row("200 200 403 200 400 403 login login",
                                            body=lambda w: {"name": "ci", "scopes": ["read"]}),
    ("portal:token-revoke", "post"):    Row("302 302 302 404 404 404 login login", viewer_token),
    # The tenant's signing keys: every member reads them, only its admin registers and
    # revokes; the page does not exist for provider staff (they never act as a tenant user).
    ("portal:signing-keys", "get"):     Row("404 200 200 200 200 200 login login"),
    ("portal:signing-keys", "post"):    Row("404 200 403 403 403 403 login login",
                                            body=portal_key_form),
    ("portal:signing-key-revoke", "post"): Row("404 302 403 403 403 404 login login",
                                            pk_of(key_of), body=confirmed_revocation),
    # The tenant's own settings: every member reads them (the first tenant by slug: alpha for
    # "two"; a user of no tenant is told so), only its admin changes them; a tenant one is not
    # a member of is a 404; the page does not exist for provider staff.
    ("portal:tenant-settings", "get"):  Row("404 200 200 200 200 200 login login"),
    ("portal:tenant-settings", "post"): Row("404 200 403 403 403 404 login login",
                                            body=portal_settings_form),
    # A pending amendment: read by all who see the lease, acknowledged by alpha's admin only.
    ("portal:amendment", "get"):        Row("200 200 200 200 200 404 login login",
                                            pending_amendment),
    ("portal:amendment", "post"):       Row("403 302 403 403 403 404 login login",
                                            pending_amendment, body=portal_acknowledgement),
    ("portal:invoices", "get"):         Row("200 200 200 200 200 200 login login"),
    ("portal:invoices", "post"):        Row("200 200 200 200 200 200 login login"),
    ("portal:vouchers", "get"):         Row("200 200 200 200 200 200 login login"),
    ("portal:vouchers", "post"):        Row("200 200 200 200 200 200 login login"),
    ("portal:voucher", "get"):          Row("200 200 200 200 200 404 login login",
                                            pk_of(voucher_of)),
    ("portal:voucher", "post"):         Row("200 200 200 200 200 404 login login",
                                            pk_of(voucher_of)),
    ("portal:invoice", "get"):          Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice", "post"):         Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-csv", "get"):      Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-csv", "post"):     Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-pdf", "get"):      Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-pdf", "post"):     Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-xlsx", "get"):     Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-xlsx", "post"):    Row("200 200 200 200 200 404 login login",
                                            pk_of(lambda side: side.invoice)),
    ("portal:invoice-einvoice", "get"): Row("200 200 200 200 200 404 login login",
                                            pk_of(issued_invoice_of)),
    ("portal:invoice-einvoice", "post"): Row("200 200 200 200 200 404 login login",
                                            pk_of(issued_invoice_of)),
    ("portal:credit-note-pdf", "get"):  Row("200 200 200 200 200 404 login login",
                                            pk_of(credit_note_of)),
    ("portal:credit-note-pdf", "post"): Row("200 200 200 200 200 404 login login",
                                            pk_of(credit_note_of)),
    ("portal:credit-note-einvoice", "get"):  Row("200 200 200 200 200 404 login login",
                                                 pk_of(credit_note_of)),
    ("portal:credit-note-einvoice", "post"): Row("200 200 200 200 200 404 login login",
                                                 pk_of(credit_note_of)),
    # Provider pages do not exist for anybody but staff.
    ("portal:fleet", "get"):            Row("200 404 404 404 404 404 login login"),
    ("portal:fleet", "post"):           Row("200 404 404 404 404 404 login login"),
    ("portal:fabrics", "get"):          Row("200 404 404 404 404 404 login login"),
    ("portal:fabrics", "post"):         Row("200 404 404 404 404 404 login login"),
    ("portal:cost-share", "get"):       Row("200 404 404 404 404 404 login login"),
    ("portal:cost-share", "post"):      Row("200 404 404 404 404 404 login login"),
    ("portal:incidents", "get"):        Row("200 404 404 404 404 404 login login"),
    ("portal:incidents", "post"):       Row("200 404 404 404 404 404 login login"),
}
# fmt: on

# Routes the matrix leaves out, by path prefix, each with its reason. A prefix that no
# longer matches any route fails the coverage test, like a row without a route.
EXCLUDED = {
    "admin/": "Django's admin site: Django itself lets only active staff in "
    "(tests/leases/test_admin.py and friends cover its pages)",
    "api/schema/": "the OpenAPI document: it describes the routes and holds no tenant data "
    "(tests/api/test_schema.py)",
    "api/docs/": "Swagger UI over the OpenAPI document, no tenant data",
    "api/redoc/": "ReDoc over the OpenAPI document, no tenant data",
}

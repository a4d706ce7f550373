"""Tenant data is read through Model.objects.visible_to(user): staff see all, a member sees
their tenant's rows, anyone else sees none. Checked for every model that declares a
tenant_path, so a new tenant-owned model is covered (or this test fails) automatically."""

from decimal import Decimal
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser

from accounts.choices import Role
from benchmarks import services as probe_services
from benchmarks.models import Rejudgement
from billing import checkpoints, evidence, invoicing, thresholds
from billing import services as billing_services
from billing.models import (
    HourlyRollup,
    RunningFigure,
    ThresholdCrossing,
    TrafficSample,
    Voucher,
    VoucherRedemption,
    VoucherReduction,
    VoucherReturn,
)
from incidents.models import Incident
from leases import services, tenant_settings
from leases.choices import LeaseStatus
from leases.models import Node
from telemetry.models import PortClearance, PortSample, TelemetryBatch
from tests.factories import (
    MembershipFactory,
    NicPortFactory,
    NodeFactory,
    StaffFactory,
    at,
    make_lease,
    make_run,
    register_tenant_key,
)

pytestmark = pytest.mark.django_db

# Customer evidence (billing.models.Evidence): a published ping output (SOURCES.md there).
PING = (
    Path(__file__).parent.parent
    / "benchmarks"
    / "fixtures"
    / "ping"
    / "iputils_20221126_loopback.txt"
)


def tenant_owned_models():
    return [model for model in apps.get_models() if hasattr(model, "tenant_path")]


def owned_by(model, obj, tenant) -> bool:
    if not model.tenant_path:  # the Tenant itself
        return obj.pk == tenant.pk
    return model._default_manager.filter(pk=obj.pk, **{model.tenant_path: tenant}).exists()


@pytest.fixture
def world():
    """Two tenants, each with a member, a lease with a node and its NIC port."""
    members = {}
    for name in ("alpha", "beta"):
        membership = MembershipFactory(tenant__slug=name, role=Role.ADMIN)
        node, second = NodeFactory(), NodeFactory()
        NicPortFactory(node=node)
        lease = make_lease(tenant=membership.tenant, nodes=[node, second])
        services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))
        probe_services.request_runs(
            lease=lease, kinds=["link"], now=at("2026-11-02 00:00"), enqueue=False
        )
        run = make_run(lease, slot=at("2026-11-02 10:00"), verdict="fail", measured_bps=1)
        Rejudgement.objects.create(
            lease=lease, run=run, terms=run.terms, verdict="fail", judged_at=run.slot_at
        )
        HourlyRollup.objects.create(lease=lease, kind="throughput", hour=run.slot_at, failed=1)
        TrafficSample.objects.create(
            lease=lease, slot_at=run.slot_at, seconds=300, tx_bytes=1, nodes=1
        )
        RunningFigure.objects.create(
            lease=lease,
            period="2026-11",
            billing_mode="per_gb",
            quantity=0,
            unit="GB",
            amount=0,
            computed_at=run.slot_at,
        )
        batch = TelemetryBatch.objects.create(lease=lease, at=run.slot_at)
        PortSample.objects.create(
            node=node, batch=batch, port="mlx5_0:1", at=run.slot_at, seconds=30, up=True
        )
        PortClearance.objects.create(
            batch=batch, node=node, port="mlx5_0:1", at=run.slot_at, by="ops", reason="reseated"
        )
        Incident.objects.create(
            lease=lease,
            kind="throughput",
            target=run.target,
            pattern=run.pattern,
            opened_at=run.slot_at,
            rule=run.rule,
            terms=run.terms,
        )
        november = invoicing.draft_invoice(
            tenant=membership.tenant, period="2026-11", now=at("2026-12-02 00:00")
        )
        issued = billing_services.issue_invoice(
            invoice=november, force=True, reason="test world", now=at("2026-12-02 00:00")
        )
        note = billing_services.create_credit_note(invoice=issued, reason="Reversed.")
        # A voucher (billing.vouchers) and its redemption on a later invoice.
        voucher = Voucher.objects.create(
            tenant=membership.tenant,
            lease=lease,
            source_invoice=issued,
            number=f"GL-VC-2026-{membership.tenant.pk:06d}",
            period="2026-11",
            amount="100.00",
            issued_at=issued.issued_at,
            validity_months=12,
            expires_at=at("2027-12-02 00:00"),
            description="SLA credit",
        )
        redemption = VoucherRedemption.objects.create(
            voucher=voucher, invoice=issued, amount="10.00", at=issued.issued_at
        )
        # What a credit note gave back of it, and what a late result took off.
        VoucherReturn.objects.create(
            redemption=redemption, credit_note=note, amount="1.00", at=issued.issued_at
        )
        VoucherReduction.objects.create(
            voucher=voucher, invoice=issued, amount="1.00", at=issued.issued_at, reason="late"
        )
        checkpoints.create_checkpoint(lease=lease, period="2026-11", now=at("2026-12-01 00:00"))
        proof = evidence.submit_evidence(
            lease=lease,
            user=membership.user,
            tool="ping",
            raw_output=PING.read_text(),
            nodes=[node.hostname, second.hostname],
            measured_at=at("2026-11-03 09:00"),
            now=at("2026-11-03 10:00"),
        )
        evidence.open_dispute(
            lease=lease, user=membership.user, reason="slow", probe_run=run, evidence=[proof]
        )
        # A signing key: its registration is a tenant link on the lease's chain.
        register_tenant_key(membership.user, membership.tenant)
        services.propose_retroactive_amendment(
            lease=lease,
            effective_from=at("2026-11-20 00:00"),
            changes={"credit_cap_percent": "40"},
            reason="test world",
        )
        # A change of the tenant's own settings: a TenantSettingsEvent.
        tenant_settings.set_webhook_url(
            tenant=membership.tenant, user=membership.user, url="https://93.184.215.14/hook"
        )
        # A threshold of the tenant, and a crossing of it.
        threshold = thresholds.create_threshold(
            tenant=membership.tenant, user=membership.user, kind="spend_cny", value=Decimal(1)
        )
        ThresholdCrossing.objects.create(
            threshold=threshold,
            period="2026-11",
            value=threshold.value,
            figure=Decimal(2),
            sample_at=run.slot_at,
            crossed_at=run.slot_at,
        )
        members[name] = membership
    NodeFactory()  # never leased: visible to staff only
    return members


def test_every_tenant_owned_model_is_scoped(world):
    models = tenant_owned_models()
    assert len(models) >= 8
    alpha, beta = world["alpha"], world["beta"]
    for model in models:
        rows = list(model._default_manager.all())
        assert any(owned_by(model, row, alpha.tenant) for row in rows), model
        assert any(owned_by(model, row, beta.tenant) for row in rows), model
        visible = set(model.objects.visible_to(alpha.user))
        for row in rows:
            assert (row in visible) == owned_by(model, row, alpha.tenant), (model, row)


def test_staff_see_everything_and_strangers_nothing(world):
    staff, stranger = StaffFactory(), MembershipFactory().user
    for model in tenant_owned_models():
        everything = model._default_manager.count()
        assert model.objects.visible_to(staff).count() == everything
        assert model.objects.visible_to(AnonymousUser()).count() == 0
        mine = model.objects.visible_to(stranger)
        assert all(owned_by(model, row, stranger.memberships.get().tenant) for row in mine)


def test_an_inactive_member_sees_nothing(world):
    user = world["alpha"].user
    user.is_active = False
    user.save()
    for model in tenant_owned_models():
        assert model.objects.visible_to(user).count() == 0


def test_a_node_in_two_leases_of_a_tenant_is_listed_once(world):
    alpha = world["alpha"]
    node = NodeFactory()
    make_lease(
        tenant=alpha.tenant,
        nodes=[node],
        starts_at=at("2026-01-01 00:00"),
        ends_at=at("2026-02-01 00:00"),
    )
    lease = make_lease(tenant=alpha.tenant, starts_at=at("2026-03-01 00:00"))
    services.assign_node(lease=lease, node=node)
    assert list(Node.objects.visible_to(alpha.user)).count(node) == 1

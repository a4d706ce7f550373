import itertools
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import factory
from django.contrib.auth import get_user_model

from accounts.choices import Role
from accounts.models import Membership
from leases.choices import BillingMode, GpuModel, LinkLayer, SwitchRole, Technology, Topology
from leases.models import Fabric, NicPort, Node, Site, Switch, Tenant

SHANGHAI = ZoneInfo("Asia/Shanghai")


def at(text: str) -> datetime:
    """'2026-11-01 00:00' in Asia/Shanghai, as an aware datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=SHANGHAI)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.cn")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):  # type: ignore[no-untyped-def]
        if create:
            obj.save()


class StaffFactory(UserFactory):
    is_staff = True
    is_superuser = True


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant

    name = factory.Sequence(lambda n: f"Tenant {n}")
    slug = factory.Sequence(lambda n: f"tenant-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Role.VIEWER


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    name = factory.Sequence(lambda n: f"Site {n}")
    code = factory.Sequence(lambda n: f"site-{n}")
    city = "Shenzhen"


class FabricFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Fabric

    site = factory.SubFactory(SiteFactory)
    name = factory.Sequence(lambda n: f"fabric-{n}")
    technology = Technology.ROCE
    port_speed_gbps = 100
    topology = Topology.LEAF_SPINE
    oversubscription = Decimal("2")


class SwitchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Switch

    fabric = factory.SubFactory(FabricFactory)
    name = factory.Sequence(lambda n: f"leaf{n}")
    role = SwitchRole.LEAF


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    hostname = factory.Sequence(lambda n: f"node-{n:03d}")
    management_address = factory.Sequence(lambda n: f"198.18.1.{n % 250 + 1}")
    gpu_model = GpuModel.A100
    leaf_switch = factory.SubFactory(SwitchFactory)


class NicPortFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NicPort

    node = factory.SubFactory(NodeFactory)
    device = "mlx5_0"
    rate_gbps = 100
    link_layer = LinkLayer.ETHERNET


_references = itertools.count(1)


def terms(**overrides):  # type: ignore[no-untyped-def]
    values = {
        "contracted_bandwidth_gbps": Decimal("100"),
        "technology": Technology.ROCE,
        "billing_mode": BillingMode.MONTHLY,
        "node_rent_per_month": Decimal("45000.00"),
        "network_fee_per_month": Decimal("6000.00"),
        # One VAT rate for rent and network service (the service default, 6%), so that an
        # invoice has one rate group unless a test gives the rent its own rate.
        "rent_tax_rate_percent": Decimal("6"),
    }
    values.update(overrides)
    return values


def make_lease(
    *,
    tenant=None,
    reference=None,
    starts_at=None,
    ends_at=None,
    nodes=(),  # type: ignore[no-untyped-def]
    **term_overrides,
):
    from leases import services

    tenant = tenant or TenantFactory()
    lease = services.create_lease(
        tenant=tenant,
        reference=reference or f"L-{next(_references)}",
        starts_at=starts_at or at("2026-11-01 00:00"),
        ends_at=ends_at,
        terms=terms(**term_overrides),
    )
    for node in nodes:
        services.assign_node(lease=lease, node=node)
    return lease


def make_run(
    lease,
    *,
    kind="throughput",
    slot=None,
    state="ok",
    verdict="pass",  # type: ignore[no-untyped-def]
    measured_bps=None,
    target="n1>n2",
    pattern="ring",
    tool=None,
    parsed=None,
    cadence_s=3600,
    finished=None,
    trigger="schedule",
    latency_us=None,
    nodes=(),
):
    """A finished probe run as the probes would have stored it (no tool is run)."""
    from datetime import timedelta

    from benchmarks.models import ProbeRun

    slot = slot or at("2026-11-02 10:00")
    site = SiteFactory() if not nodes else nodes[0].leaf_switch.fabric.site
    terms = lease.terms.filter(effective_from__lte=slot).order_by("-effective_from").first()
    if kind == "link" and state == "ok" and parsed is None and verdict != "none":
        parsed = {"ports": [_link_port(verdict == "pass")]}
    judgement = _judgement(kind, state, terms, measured_bps, latency_us, parsed)
    run = ProbeRun.objects.create(
        lease=lease,
        kind=kind,
        tool=tool
        or {"throughput": "iperf3", "link": "ethtool", "counters": "counters"}.get(kind, "ping"),
        target=target,
        pattern=pattern,
        trigger=trigger,
        slot_at=slot,
        deadline_at=slot + timedelta(seconds=cadence_s),
        site=site,
        state=state,
        started_at=slot + timedelta(seconds=5),
        finished_at=finished or slot + timedelta(seconds=20),
        verdict=verdict if state == "ok" else "none",
        measured_bps=measured_bps,
        latency_us=latency_us,
        parsed=parsed,
        terms=terms,
        rule=judgement.rule
        if judgement
        else "throughput >= 95% of 100 Gbps contracted (terms v1)"
        if kind == "throughput"
        else "",
        verdict_reason=judgement.reason if judgement else "",
    )
    if nodes:
        run.nodes.set(nodes)
    return run


def make_sweep(
    lease,
    *,
    kind="link",
    slot=None,
    outputs=None,
    failures=None,
    trigger="schedule",
    cadence_s=300,
    finished=None,
):  # type: ignore[no-untyped-def]
    """A link or counters sweep as a worker records it: what each node printed
    (``outputs``, hostname -> text; ``failures``, hostname -> (state, error) for a node
    that gave nothing) goes through the probes' own recording
    (``benchmarks.recording.record_execution``), so its parsed result, verdict, flap
    detection and chain link are the real ones. Every node the lease holds at ``slot``
    must be in one of the two."""
    from datetime import timedelta

    from benchmarks import recording, selectors
    from benchmarks.models import ProbeRun
    from benchmarks.probes import commands, runner
    from benchmarks.probes.plan import NODE_TOOLS
    from gpulease_verify import sweep
    from leases import selectors as lease_selectors

    slot = slot or at("2026-11-02 10:00")
    nodes = lease_selectors.lease_nodes_at(lease_ids=[lease.pk], at=slot).get(lease.pk, [])
    plan = selectors.plan_nodes(nodes, lease_selectors.ports_of(nodes=nodes))
    outputs, failures = outputs or {}, failures or {}
    assert set(outputs) | set(failures) == set(plan), (sorted(plan), outputs, failures)
    infiniband = any(p.link_layer == "infiniband" for n in plan.values() for p in n.ports)
    terms = lease.terms.filter(effective_from__lte=slot).order_by("-effective_from").first()
    started = slot + timedelta(seconds=5)
    run = ProbeRun.objects.create(
        lease=lease,
        kind=kind,
        tool=NODE_TOOLS[kind][0 if infiniband else 1],
        target=sweep.ALL,
        pattern="sweep",
        trigger=trigger,
        slot_at=slot,
        deadline_at=slot + timedelta(seconds=cadence_s),
        site=nodes[0].leaf_switch.fabric.site,
        terms=terms,
        state="running",
        attempts=1,
        started_at=started,
    )
    build = commands.counters if kind == "counters" else commands.link_check
    printed = [
        sweep.NodeOutput(name, "ok", build(plan[name]), 0, "", text)
        for name, text in outputs.items()
    ] + [
        sweep.NodeOutput(name, state, "", None, error) for name, (state, error) in failures.items()
    ]
    execution = runner.Execution(
        raw_output=sweep.transcript(printed),
        exit_code=0 if outputs else None,
        started_at=started,
        finished_at=finished or slot + timedelta(seconds=20),
        nodes=sorted(printed, key=lambda out: out.node),
    )
    return recording.record_execution(
        run=run, execution=execution, terms=terms, plan=plan, hostnames=sorted(plan)
    )


def _link_port(up):  # type: ignore[no-untyped-def]
    """A parsed ethtool port as the link check stores it: up at 100 Gbit/s, or down."""
    return {
        "label": "eth0",
        "up": up,
        "speed_bps": 100 * 10**9 if up else None,
        "expected_bps": 100 * 10**9,
        "link_down_count": 0,
        "previous_link_down_count": None,
    }


def _judgement(kind, state, terms, measured_bps, latency_us, parsed):  # type: ignore[no-untyped-def]
    """The rule and reason the server's verdict rules give the run's figures (None when
    there is nothing to judge), so that an audit bundle re-judges them the same."""
    from benchmarks.recording import terms_view
    from gpulease_verify import verdicts
    from gpulease_verify.interpret import port_state

    if state != "ok" or terms is None:
        return None
    view = terms_view(terms)
    if kind == "throughput" and measured_bps is not None:
        return verdicts.throughput(measured_bps=measured_bps, terms=view)
    if kind == "latency" and latency_us is not None:
        return verdicts.latency(measured_us=latency_us, terms=view)
    if kind == "link" and parsed and "ports" in parsed:
        return verdicts.link(ports=[port_state(p) for p in parsed["ports"]], terms=view)
    return None


def amend_acknowledged(*, lease, effective_from, changes, reason, actor=None):  # type: ignore[no-untyped-def]
    """A terms amendment taking effect in the past, as the services allow it: proposed,
    then acknowledged by a tenant admin of the lease's tenant (one is made if none)."""
    from accounts.choices import Role
    from accounts.models import Membership
    from leases import services

    amendment = services.propose_retroactive_amendment(
        lease=lease, effective_from=effective_from, changes=changes, reason=reason, actor=actor
    )
    admin = Membership.objects.filter(tenant=lease.tenant, role=Role.ADMIN).first()
    if admin is None:
        admin = MembershipFactory(tenant=lease.tenant, role=Role.ADMIN)
    return services.acknowledge_amendment(
        amendment=amendment, user=admin.user, reason="Agreed with the provider."
    )


def register_tenant_key(admin, tenant, private=None, *, label=""):  # type: ignore[no-untyped-def]
    """A fresh Ed25519 key pair of ``tenant`` registered by ``admin`` as a client does it:
    the registration content signed with the new key. Returns (private key, TenantKey)."""
    from django.utils import timezone

    from gpulease_verify import cosign as rules
    from leases import cosign

    private = private or rules.generate()
    public = rules.public_key_text(private.public_key())
    when = timezone.now()
    content = cosign.registration_content(tenant=tenant, user=admin, public_key=public, at=when)
    key = cosign.register_key(
        tenant=tenant,
        user=admin,
        public_key=public,
        signature=rules.sign(private, content),
        signed_at=when,
        label=label,
    )
    return private, key

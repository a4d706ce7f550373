"""Demo data: two customers renting 8-GPU servers in Shenzhen, Guangzhou and Dongguan.

Idempotent: objects are found by natural key and created only when missing, so running it
twice changes nothing. Lease dates are anchored on the month it first runs in.
"""

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.choices import Role
from accounts.models import Membership
from accounts.selectors import first_admin_of
from common.staff_groups import ensure_provider_staff_group
from gpulease_verify.periods import Period
from leases import services
from leases.choices import (
    BillingMode,
    GpuModel,
    HeavyProbePolicy,
    LeaseStatus,
    LinkLayer,
    SwitchRole,
    Technology,
    Topology,
)
from leases.models import Fabric, Lease, NicPort, Node, Site, Switch, Tenant

DEMO_ZONE = "Asia/Shanghai"
WITNESS_COMMUNITY = "gpulease-ro"
LOGINS_FILE = "demo-logins.txt"


@dataclass
class Login:
    role: str
    username: str
    password: str


# The two kinds of provider login the demo makes (users()).
SUPERUSER, STAFF = "superuser", "staff"


@dataclass
class DemoResult:
    tenants: int = 0
    nodes: int = 0
    leases: int = 0
    created: int = 0
    logins: list[Login] = field(default_factory=list)


@dataclass(frozen=True)
class FabricPlan:
    site: tuple[str, str, str]  # name, code, city
    name: str
    technology: str
    speed_gbps: int
    topology: str
    oversubscription: Decimal
    adaptive_routing: bool
    leaves: int
    spines: int
    gpu_model: str
    node_prefix: str
    nodes: int
    nic_ports: int
    data_network: str  # the nodes' data addresses: node n of the fabric is .n
    management_network: str  # the switches' management addresses: leaf n is .n
    witness_leaves: int = 0  # the first leaves are read over SNMP (the switch-side witness)


FABRICS = [
    FabricPlan(
        ("深圳南山智算中心 SZ-NS1", "sz-ns1", "Shenzhen"),
        "roce-100g",
        Technology.ROCE,
        100,
        Topology.LEAF_SPINE,
        Decimal("2"),
        False,
        2,
        2,
        GpuModel.A100,
        "sz-a100",
        8,
        2,
        "10.16.1",
        "10.16.0",
        witness_leaves=1,
    ),
    FabricPlan(
        ("广州黄埔智算中心 GZ-HP2", "gz-hp2", "Guangzhou"),
        "ib-400g",
        Technology.INFINIBAND,
        400,
        Topology.FAT_TREE,
        Decimal("1"),
        True,
        2,
        2,
        GpuModel.H800,
        "gz-h800",
        6,
        8,
        "10.32.1",
        "10.32.0",
    ),
    FabricPlan(
        ("东莞松山湖数据中心 DG-SSL", "dg-ssl", "Dongguan"),
        "roce-25g",
        Technology.ROCE,
        25,
        Topology.LEAF_SPINE,
        Decimal("1"),
        False,
        1,
        1,
        GpuModel.A800,
        "dg-a800",
        4,
        1,
        "10.48.1",
        "10.48.0",
    ),
]


def _month_start(months_ago: int) -> datetime:
    """Midnight on the 1st, ``months_ago`` months before this one, in Shanghai."""
    this_month = Period.containing(timezone.now(), DEMO_ZONE)
    return this_month.shift(-months_ago).local_start(DEMO_ZONE)


class _Loader:
    def __init__(self) -> None:
        self.result = DemoResult()

    def get_or_create(self, model, defaults=None, **lookup):  # type: ignore[no-untyped-def]
        obj, created = model.objects.get_or_create(defaults=defaults or {}, **lookup)
        self.result.created += int(created)
        return obj

    def inventory(self) -> dict[str, list[Node]]:
        nodes: dict[str, list[Node]] = {}
        for plan in FABRICS:
            site = self.get_or_create(
                Site,
                code=plan.site[1],
                defaults={"name": plan.site[0], "city": plan.site[2], "region": "Guangdong"},
            )
            fabric = self.get_or_create(
                Fabric,
                site=site,
                name=plan.name,
                defaults={
                    "technology": plan.technology,
                    "port_speed_gbps": plan.speed_gbps,
                    "topology": plan.topology,
                    "oversubscription": plan.oversubscription,
                    "adaptive_routing": plan.adaptive_routing,
                },
            )
            for index in range(1, plan.spines + 1):
                self.get_or_create(
                    Switch,
                    fabric=fabric,
                    name=f"{plan.name}-spine{index}",
                    defaults={"role": SwitchRole.SPINE},
                )
            leaves = [
                self.get_or_create(
                    Switch,
                    fabric=fabric,
                    name=f"{plan.name}-leaf{index}",
                    defaults={
                        "role": SwitchRole.LEAF,
                        # gpulease reads the first leaves' port counters over SNMP.
                        **(
                            {
                                "management_address": f"{plan.management_network}.{index}",
                                "snmp_community": WITNESS_COMMUNITY,
                            }
                            if index <= plan.witness_leaves
                            else {}
                        ),
                    },
                )
                for index in range(1, plan.leaves + 1)
            ]
            layer = (
                LinkLayer.INFINIBAND
                if plan.technology == Technology.INFINIBAND
                else LinkLayer.ETHERNET
            )
            nodes[plan.name] = []
            per_leaf = -(-plan.nodes // plan.leaves)
            for index in range(1, plan.nodes + 1):
                node = self.get_or_create(
                    Node,
                    hostname=f"{plan.node_prefix}-{index:02d}",
                    defaults={
                        "management_address": f"{plan.node_prefix}-{index:02d}.mgmt.example.cn",
                        "gpu_model": plan.gpu_model,
                        "gpu_count": 8,
                        # Spread nodes over the leaves, half per leaf, as racks are cabled.
                        "leaf_switch": leaves[(index - 1) * plan.leaves // plan.nodes],
                    },
                )
                for port in range(plan.nic_ports):
                    self.get_or_create(
                        NicPort,
                        node=node,
                        device=f"mlx5_{port}",
                        port_number=1,
                        defaults={
                            "netdev": ""
                            if layer == LinkLayer.INFINIBAND
                            else f"ens{port + 1}f0np0",
                            "rate_gbps": plan.speed_gbps,
                            "link_layer": layer,
                            # The first port carries the node's data address (IPoIB on
                            # InfiniBand), which throughput probes bind to.
                            "address": f"{plan.data_network}.{index}" if port == 0 else None,
                            # As cabled: the leaf's ports in node order, one per NIC port.
                            "switch_port": f"{'IB1' if layer == LinkLayer.INFINIBAND else 'Eth1'}/"
                            f"{(index - 1) % per_leaf * plan.nic_ports + port + 1}",
                        },
                    )
                nodes[plan.name].append(node)
        return nodes

    def tenants(self) -> tuple[Tenant, Tenant]:
        zhiyuan = self.get_or_create(
            Tenant,
            slug="zhiyuan",
            defaults={
                "name": "深圳智元大模型科技 Zhiyuan LLM",
                "contact_name": "陈工 Chen Wei",
                "contact_email": "infra@zhiyuan.example.cn",
                "contact_phone": "+86 755 0000 0001",
            },
        )
        lingxi = self.get_or_create(
            Tenant,
            slug="lingxi",
            defaults={
                "name": "广州灵犀智能 Lingxi AI",
                "contact_name": "林工 Lin Fang",
                "contact_email": "ops@lingxi.example.cn",
                "contact_phone": "+86 20 0000 0002",
            },
        )
        self.result.tenants = 2
        return zhiyuan, lingxi

    def lease(
        self,
        *,
        tenant,
        reference,
        name,
        nodes,
        starts_at,
        ends_at,
        terms,  # type: ignore[no-untyped-def]
        activate=True,
        amendments=(),
    ):
        if Lease.objects.filter(reference=reference).exists():
            return
        lease = services.create_lease(
            tenant=tenant,
            reference=reference,
            name=name,
            starts_at=starts_at,
            ends_at=ends_at,
            terms=terms,
            probes_enabled=False,  # the demo's nodes are not real hosts
        )
        for node in nodes:
            services.assign_node(lease=lease, node=node)
        for effective_from, changes, reason in amendments:
            # The demo's history is in the past: its tenant admin acknowledges each
            # amendment, as a real one taking effect before it is recorded needs.
            amendment = services.propose_retroactive_amendment(
                lease=lease, effective_from=effective_from, changes=changes, reason=reason
            )
            admin = first_admin_of(tenant.pk)
            services.acknowledge_amendment(
                amendment=amendment,
                user=admin,
                reason="Signed the amendment with the provider; the demo records it now.",
            )
        if activate:
            services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
        self.result.created += 1

    def leases(self, zhiyuan: Tenant, lingxi: Tenant, nodes: dict[str, list[Node]]) -> None:
        roce100, ib400, roce25 = nodes["roce-100g"], nodes["ib-400g"], nodes["roce-25g"]
        three_months_ago, last_month = _month_start(3), _month_start(1)
        common = {
            "technology": Technology.ROCE,
            "sla_threshold_percent": Decimal("95"),
            "tax_rate_percent": Decimal("6"),
        }
        self.lease(
            tenant=zhiyuan,
            reference="ZY-2026-001",
            name="7B-70B 预训练集群 pre-training",
            nodes=roce100[:4],
            starts_at=three_months_ago,
            ends_at=None,
            terms={
                **common,
                "contracted_bandwidth_gbps": Decimal("100"),
                "billing_mode": BillingMode.MONTHLY,
                "node_rent_per_month": Decimal("45000.00"),
                "network_fee_per_month": Decimal("22000.00"),
                "collective_busbw_floor_gbps": Decimal("90"),
                "heavy_probe_policy": HeavyProbePolicy.WINDOWS_ONLY,
                "heavy_probe_windows": [
                    {"weekday": d, "start": "01:00", "end": "05:00"} for d in range(7)
                ],
                "maintenance_windows": [{"weekday": 6, "start": "02:00", "end": "04:00"}],
            },
            amendments=[
                (
                    last_month + timedelta(days=14),
                    {
                        "contracted_bandwidth_gbps": Decimal("200"),
                        "network_fee_per_month": Decimal("30000.00"),
                    },
                    "Upgraded to dual-port 2x100G RoCE (双口 200G) for the 70B run.",
                )
            ],
        )
        self.lease(
            tenant=zhiyuan,
            reference="ZY-2026-002",
            name="H800 400G IB 包年",
            nodes=ib400[:4],
            starts_at=three_months_ago,
            ends_at=_month_start(3 - 12),
            terms={
                **common,
                "technology": Technology.INFINIBAND,
                "contracted_bandwidth_gbps": Decimal("400"),
                "billing_mode": BillingMode.YEARLY,
                "node_rent_per_month": Decimal("98000.00"),
                "network_fee_per_month": Decimal("18000.00"),
                "collective_busbw_floor_gbps": Decimal("360"),
                "latency_ceiling_us": Decimal("5"),
                "billing_starts_on_acceptance": True,
            },
        )
        self.lease(
            tenant=lingxi,
            reference="LX-2026-001",
            name="推理压测 burst tests (按量)",
            nodes=roce100[4:6],
            starts_at=last_month,
            ends_at=None,
            terms={
                **common,
                "contracted_bandwidth_gbps": Decimal("100"),
                "billing_mode": BillingMode.PER_GB,
                "node_rent_per_month": Decimal("45000.00"),
                "price_per_gb": Decimal("0.0300"),
            },
        )
        self.lease(
            tenant=lingxi,
            reference="LX-2026-002",
            name="A800 微调 fine-tuning (95计费)",
            nodes=roce25,
            starts_at=three_months_ago,
            ends_at=None,
            terms={
                **common,
                "contracted_bandwidth_gbps": Decimal("25"),
                "billing_mode": BillingMode.P95,
                "node_rent_per_month": Decimal("38000.00"),
                "price_per_mbps_p95": Decimal("0.4000"),
            },
        )
        self.lease(
            tenant=lingxi,
            reference="LX-2026-003",
            name="H800 扩容 expansion (draft)",
            nodes=ib400[4:6],
            starts_at=_month_start(-1),
            ends_at=None,
            activate=False,
            terms={
                **common,
                "technology": Technology.INFINIBAND,
                "contracted_bandwidth_gbps": Decimal("400"),
                "billing_mode": BillingMode.MONTHLY,
                "node_rent_per_month": Decimal("98000.00"),
                "network_fee_per_month": Decimal("18000.00"),
            },
        )
        self.result.leases = Lease.objects.count()

    def users(self, zhiyuan: Tenant, lingxi: Tenant) -> None:
        path = settings.VAR_DIR / LOGINS_FILE
        saved = json.loads(path.read_text()) if path.exists() else {}
        user_model = get_user_model()
        # The superuser holds every permission; the operator holds the provider staff
        # group's (common.staff_groups): no webhook secrets, no other users' tokens.
        staff_group = ensure_provider_staff_group()
        plan = [
            ("provider admin", "provider", None, SUPERUSER),
            ("provider operator", "provider-ops", None, STAFF),
            ("tenant admin", "zhiyuan-admin", zhiyuan, Role.ADMIN),
            ("tenant viewer", "zhiyuan-viewer", zhiyuan, Role.VIEWER),
            ("auditor", "zhiyuan-auditor", zhiyuan, Role.AUDITOR),
            # LX-2026-001's tenant: the breached lease, seen by its own customer.
            ("tenant admin", "lingxi-admin", lingxi, Role.ADMIN),
        ]
        for label, username, tenant, role in plan:
            user = user_model.objects.filter(username=username).first()
            password = saved.get(username)
            if user is None or password is None or not user.check_password(password):
                password = secrets.token_urlsafe(9)
                if user is None:
                    user = user_model(username=username, email=f"{username}@example.cn")
                    self.result.created += 1
                user.set_password(password)
                user.is_staff = tenant is None
                user.is_superuser = role == SUPERUSER
                user.save()
                saved[username] = password
            if role == STAFF:
                user.groups.add(staff_group)
            if tenant is not None:
                self.get_or_create(Membership, user=user, tenant=tenant, defaults={"role": role})
            self.result.logins.append(Login(label, username, password))
        path.write_text(json.dumps(saved, indent=2))
        path.chmod(0o600)


def load_demo() -> DemoResult:
    # `manage.py demo` (the demo app, above every app it loads into) loads in three steps:
    # this (inventory, leases, users), then demo.history.load_history (runs, chain, ingest,
    # acceptance), then demo.invoices.load_invoices, which reads the ingested history.
    loader = _Loader()
    with transaction.atomic():
        nodes = loader.inventory()
        zhiyuan, lingxi = loader.tenants()
        loader.users(zhiyuan, lingxi)  # first: its tenant admin acknowledges past amendments
        loader.leases(zhiyuan, lingxi, nodes)
    loader.result.nodes = Node.objects.count()
    return loader.result

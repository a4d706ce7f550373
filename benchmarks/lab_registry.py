"""Register a running network lab as inventory and a lease, so probes reach it like any
other cluster: site "lab", fabric "lab-fabric", nodes lab-h1..N, lease LAB-1 at 1 Gbps.

The leaf switches get the lab's SNMP agent as their management address (one snmpd serves
every bridge of the fabric), and each node's data port its switch port (``hI-data``), so
the switch-side witness reads the lab like a real fabric."""

from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchmarks.netlab import LabState
from benchmarks.netlab.sshd import AUTHORIZED_KEYS
from benchmarks.probe_key import ensure_probe_key
from leases import selectors as lease_selectors
from leases import services as lease_services
from leases.choices import (
    BillingMode,
    GpuModel,
    LeaseStatus,
    LinkLayer,
    Technology,
    Topology,
)
from leases.models import Lease

LAB_LEASE = "LAB-1"
LAB_TENANT = "lab"
GIGA = 10**9


def authorize_probe_key(state: LabState) -> None:
    """Let the provider's probe key log in to the lab hosts, beside the lab's own key."""
    public = ensure_probe_key(settings.PROBE_SSH_KEY)
    path = Path(state.state_dir) / AUTHORIZED_KEYS
    keys = path.read_text().splitlines() if path.exists() else []
    if public not in keys:
        path.write_text("\n".join([*keys, public]) + "\n")


def _register_witness(state: LabState) -> None:
    """Leaf switches: where to read them over SNMP; data ports: their switch port."""
    lease_services.set_switch_snmp(
        site_code="lab",
        fabric_name="lab-fabric",
        names=state.leaves,
        management_address=state.snmp_address or None,
        snmp_port=state.snmp_port,
        snmp_community=state.snmp_community,
    )
    for index, host in enumerate(state.hosts, start=1):
        lease_services.set_switch_port(
            hostname=host.name, device="data0", switch_port=host.switch_port or f"h{index}-data"
        )


@transaction.atomic
def register_lab(state: LabState) -> Lease:
    authorize_probe_key(state)
    per_leaf = -(-len(state.hosts) // len(state.leaves))
    oversubscription = Decimal(per_leaf * state.host_rate_bps) / Decimal(state.uplink_rate_bps)
    contracted = Decimal(state.host_rate_bps) / GIGA
    nodes = lease_services.register_cluster(
        site_code="lab",
        site_name="gpulease 网络实验室 network lab",
        city="localhost",
        fabric_name="lab-fabric",
        technology=Technology.ETHERNET,
        port_speed_gbps=max(1, state.host_rate_bps // GIGA),
        topology=Topology.LEAF_SPINE,
        oversubscription=max(Decimal(1), oversubscription.quantize(Decimal("0.01"))),
        spines=["spine"],
        nodes=[
            lease_services.NodeSpec(
                hostname=host.name,
                leaf=host.leaf,
                management_address=host.mgmt_address,
                ssh_port=host.ssh_port,
                ssh_user=host.username,
                ssh_host_key=host.host_public_key,
                gpu_model=GpuModel.NONE,
                gpu_count=0,
                ports=(
                    lease_services.PortSpec(
                        device="data0",
                        netdev="data0",
                        rate_gbps=max(1, state.host_rate_bps // GIGA),
                        link_layer=LinkLayer.ETHERNET,
                        address=host.data_address,
                    ),
                ),
            )
            for host in state.hosts
        ],
    )
    _register_witness(state)
    tenant = lease_services.ensure_tenant(slug=LAB_TENANT, name="gpulease 网络实验室 network lab")
    lease = lease_selectors.leases_with_reference(reference=LAB_LEASE).first()
    if lease is None or lease.status in (LeaseStatus.ENDED, LeaseStatus.CANCELLED):
        if lease is not None:
            lease.delete()
        lease = lease_services.create_lease(
            tenant=tenant,
            reference=LAB_LEASE,
            name="network lab: 4 hosts, 2 leaves, 2:1",
            starts_at=timezone.now(),
            terms={
                # A lab is for watching probes work: check often, measure every 10 minutes.
                "probe_cadence_s": {
                    "link": 60,
                    "counters": 60,
                    "throughput": 600,
                    "latency": 600,
                    "collective": 3600,
                },
                "contracted_bandwidth_gbps": contracted,
                "technology": Technology.ETHERNET,
                "billing_mode": BillingMode.MONTHLY,
                # Lab prices, so invoices and credits have figures: 4 x 3,000 rent and a
                # 1,500 network fee is a network cost share of 11.1%.
                "node_rent_per_month": Decimal("3000.00"),
                "network_fee_per_month": Decimal("1500.00"),
            },
        )
    held = set(lease.assignments.filter(void=False).values_list("node_id", flat=True))
    for node in nodes:
        if node.pk not in held:
            lease_services.assign_node(lease=lease, node=node, assigned_from=timezone.now())
    if lease.status == LeaseStatus.DRAFT:
        lease = lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    return lease

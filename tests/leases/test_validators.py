"""The rules for inventory values that reach a node's command line: real names pass,
hostile ones are refused with a sentence that names the value and what is wrong with it."""

import re
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from gpulease_verify.parsers.rdma_link import parse_rdma_link
from leases.choices import GpuModel, LinkLayer
from leases.demo import load_demo
from leases.models import Lease, NicPort, Node
from leases.validators import (
    check_host_address,
    check_hostname,
    check_interface_name,
    check_ip_address,
    check_rdma_device_name,
    check_reference,
)
from tests.factories import NodeFactory, StaffFactory, make_lease

RDMA_LINK_FIXTURES = Path(__file__).parents[1] / "benchmarks" / "fixtures" / "rdma-link"


@pytest.mark.parametrize(
    "name",
    ["eth0", "enp65s0f0np0", "ens1f1", "bond0.100", "ib0", "data0", "veth-server", "reth0"],
)
def test_real_interface_names_pass(name):
    check_interface_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "mlx5_0",
        "ibp12s0",
        "rocep65s0f0",
        "mlx5_bond_0",
        # rdma-core kernel-boot/rdma-persistent-naming.rules, its NAME_PCI and NAME_GUID
        # examples: 9 and 21 bytes.
        "ibp0s12f4",
        "rocex525400c0fe123455",
        # A soft-RoCE device named in Atoptool/atop pull request #371: 15 bytes.
        "rxe_enp161s0np0",
    ],
)
def test_real_rdma_device_names_pass(name):
    check_rdma_device_name(name)


def test_every_name_in_the_published_rdma_link_outputs_passes():
    """Devices and netdevs as real `rdma link` outputs print them (see SOURCES.md there)."""
    devices, netdevs = set(), set()
    for path in sorted(RDMA_LINK_FIXTURES.glob("*")):
        if path.name.startswith("derived_") or path.suffix not in (".txt", ".json"):
            continue
        for link in parse_rdma_link(path.read_text()).links:
            devices.add(link.device)
            netdevs.add(link.netdev)
    netdevs.discard(None)
    assert {"mlx5_0", "mlx5_bond_3", "rxe_client"} <= devices
    assert {"ens7f1np1", "reth6", "veth-client", "ib0"} <= netdevs
    for device in devices:
        check_rdma_device_name(device)
    for netdev in netdevs:
        check_interface_name(netdev)


def test_an_rdma_name_may_be_longer_than_an_interface_name():
    """IB_DEVICE_NAME_MAX is 64 with the NUL, IFNAMSIZ 16: rdma-core's GUID-based name is a
    valid RDMA device and could not be an interface."""
    check_rdma_device_name("rocex525400c0fe123455")
    with pytest.raises(ValueError, match=r"is 21 bytes long; at most 15$"):
        check_interface_name("rocex525400c0fe123455")


def test_name_lengths_are_counted_in_bytes():
    check_interface_name("a" * 15)
    check_interface_name("网卡0")  # 3 + 3 + 1 bytes
    with pytest.raises(ValueError) as too_long:
        check_interface_name("a" * 16)
    assert str(too_long.value) == f"interface name {'a' * 16!r} is 16 bytes long; at most 15"
    with pytest.raises(ValueError, match=r"'网卡网卡网卡' is 18 bytes long; at most 15$"):
        check_interface_name("网卡网卡网卡")  # 6 characters, 18 bytes
    check_rdma_device_name("r" * 63)
    with pytest.raises(ValueError, match=r"is 64 bytes long; at most 63$"):
        check_rdma_device_name("r" * 64)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "an interface name cannot be empty"),
        (".", "'.' cannot be an interface name"),
        ("..", "'..' cannot be an interface name"),
        ("eth0/1", "interface name 'eth0/1' has '/'"),
        ("eth0:1", "interface name 'eth0:1' has ':'"),
        ("eth 0", "interface name 'eth 0' has ' '"),
        ("eth0\n", "interface name 'eth0\\n' has '\\n'"),
        ("eth\t0", "interface name 'eth\\t0' has '\\t'"),
        ("eth%d", "interface name 'eth%d' has '%'"),
        ("-S", "interface name '-S' starts with '-', which a tool would take as an option"),
        ("eth\x010", "interface name 'eth\\x010' has a control character"),
    ],
)
def test_hostile_interface_names_are_refused(name, reason):
    with pytest.raises(ValueError) as refused:
        check_interface_name(name)
    assert str(refused.value).startswith(reason)


def test_the_kernel_rules_leave_shell_characters_to_the_quoting():
    """dev_valid_name refuses only '/', ':', whitespace, '.' and '..'; an administrator can
    name an interface `eth0;x`, so the probe commands quote it rather than refuse it."""
    for name in ("eth0;x", "`x`", "a&&b", "*", "a'b", 'a"b', "a\\c", "$(reboot)"):
        check_interface_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("mlx5_0:1", "RDMA device name 'mlx5_0:1' has ':'"),
        ("mlx5_0/..", "RDMA device name 'mlx5_0/..' has '/'"),
        ("-h", "RDMA device name '-h' starts with '-', which a tool would take as an option"),
        ("mlx5_%d", "RDMA device name 'mlx5_%d' has '%'"),
    ],
)
def test_hostile_rdma_device_names_are_refused(name, reason):
    with pytest.raises(ValueError) as refused:
        check_rdma_device_name(name)
    assert str(refused.value).startswith(reason)


@pytest.mark.parametrize(
    "hostname",
    ["gpu-node-01.sz1.example.cn", "sz-a100-01", "lab-h1", "local", "1node", "A.B"],
)
def test_rfc_1123_hostnames_pass(hostname):
    check_hostname(hostname)


def test_hostname_length_limits():
    label = "a" * 63
    check_hostname(f"{label}.b")
    with pytest.raises(ValueError, match=r"has a label of 64 characters; at most 63$"):
        check_hostname(f"{label}a.b")
    longest = ".".join([label, label, label, "d" * 61])  # 63 * 3 + 61 + 3 dots = 253
    check_hostname(longest)
    with pytest.raises(ValueError, match=r"at most 253 characters; .* has 254$"):
        check_hostname(longest + "d")


@pytest.mark.parametrize(
    ("hostname", "reason"),
    [
        ("", "a hostname cannot be empty"),
        ("-node", "hostname '-node' has a label that starts or ends with '-'"),
        ("node-.sz1", "hostname 'node-.sz1' has a label that starts or ends with '-'"),
        ("node..sz1", "hostname 'node..sz1' has an empty label (a dot at an end or '..')"),
        ("node.", "hostname 'node.' has an empty label (a dot at an end or '..')"),
        ("node_01", "hostname 'node_01' has '_'; only letters, digits, hyphens and dots"),
        ("$(reboot)", "hostname '$(reboot)' has '$'"),
        ("node 01", "hostname 'node 01' has ' '"),
        ("节点01", "hostname '节点01' has '节'"),
    ],
)
def test_hostile_hostnames_are_refused(hostname, reason):
    with pytest.raises(ValueError) as refused:
        check_hostname(hostname)
    assert str(refused.value).startswith(reason)


def test_ip_addresses():
    for address in ("198.18.0.11", "fd00::1", "::ffff:10.0.0.1"):
        check_ip_address(address)
    with pytest.raises(ValueError, match=r"^'10\.0\.0\.256' is not an IP address$"):
        check_ip_address("10.0.0.256")
    # ipaddress itself accepts any text after % as an IPv6 zone.
    with pytest.raises(ValueError, match=r"^'fe80::1%;reboot' has a zone index"):
        check_ip_address("fe80::1%;reboot")


def test_a_management_address_is_an_ip_or_a_hostname():
    for address in ("10.0.0.1", "fd00::10", "gpu-node-01.mgmt.example.cn", "local"):
        check_host_address(address)
    with pytest.raises(ValueError) as refused:
        check_host_address("node;reboot")
    assert str(refused.value) == (
        "'node;reboot' is neither an IP address nor a valid hostname: hostname 'node;reboot' "
        "has ';'; only letters, digits, hyphens and dots are allowed"
    )


def test_the_node_fields_refuse_with_the_reason():
    node = Node(
        hostname="node_01",
        management_address="$(reboot)",
        ssh_port=70000,
        gpu_model=GpuModel.A100,
    )
    with pytest.raises(ValidationError) as refused:
        node.clean_fields(exclude=["leaf_switch"])
    errors = refused.value.message_dict
    assert errors["hostname"] == [
        "hostname 'node_01' has '_'; only letters, digits, hyphens and dots are allowed"
    ]
    assert errors["management_address"][0].startswith(
        "'$(reboot)' is neither an IP address nor a valid hostname"
    )
    assert errors["ssh_port"] == ["Ensure this value is less than or equal to 65535."]


def test_the_nic_port_fields_refuse_with_the_reason():
    port = NicPort(
        device="mlx5_0;x y", port_number=0, netdev="-S", rate_gbps=100, link_layer="ethernet"
    )
    with pytest.raises(ValidationError) as refused:
        port.clean_fields(exclude=["node"])
    assert refused.value.message_dict == {
        "device": [
            "RDMA device name 'mlx5_0;x y' has ' '; '/', ':', '%' and whitespace are refused"
        ],
        "port_number": ["Ensure this value is greater than or equal to 1."],
        "netdev": ["interface name '-S' starts with '-', which a tool would take as an option"],
    }


def test_an_infiniband_port_needs_no_interface_name():
    port = NicPort(device="mlx5_0", netdev="", rate_gbps=400, link_layer=LinkLayer.INFINIBAND)
    port.clean_fields(exclude=["node"])


@pytest.mark.django_db
def test_the_demo_inventory_passes_its_own_rules():
    load_demo()
    assert Node.objects.count() == 18
    for node in Node.objects.all():
        node.clean_fields()
    for port in NicPort.objects.all():
        port.clean_fields()
    for lease in Lease.objects.all():
        lease.clean_fields()


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("ZY-2026-001\r\nX", "contract reference 'ZY-2026-001\\r\\nX' has '\\r'"),
        ("+ZY", "contract reference '+ZY' has '+'"),
        ("_ZY", "contract reference '_ZY' must start with a letter or a digit"),
        ("", "a contract reference cannot be empty"),
    ],
)
def test_a_reference_outside_the_pattern_is_refused_with_its_reason(reference, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_reference(reference)


@pytest.mark.django_db
def test_the_model_refuses_a_hostile_reference_whoever_creates_the_lease():
    with pytest.raises(ValidationError) as refused:
        make_lease(reference="ZY-1 $(reboot)")
    assert refused.value.message_dict == {
        "reference": [
            "contract reference 'ZY-1 $(reboot)' has ' '; only letters, digits, '.', '_' and "
            "'-' are allowed"
        ]
    }
    assert not Lease.objects.exists()


@pytest.mark.django_db
def test_the_admin_refuses_a_hostile_interface_name(client):
    client.force_login(StaffFactory())
    node = NodeFactory()
    response = client.post(
        reverse("admin:leases_nicport_add"),
        {
            "node": node.pk,
            "device": "mlx5_0",
            "port_number": 1,
            "netdev": "$(reboot now)",
            "address": "",
            "rate_gbps": 100,
            "link_layer": LinkLayer.ETHERNET,
        },
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "netdev": [
            "interface name '$(reboot now)' has ' '; '/', ':', '%' and whitespace are refused"
        ]
    }
    assert not NicPort.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("hostname", "netdev", "message"),
    [
        ("gpu-01;reboot", "eth0", "hostname"),
        ("gpu-01", "eth0 x", "whitespace"),
        ("gpu-01", "-S", "starts with '-'"),
    ],
)
def test_hosts_that_register_themselves_are_checked_like_a_form(hostname, netdev, message):
    from decimal import Decimal

    from django.core.exceptions import ValidationError

    from leases import services
    from leases.models import Node

    spec = services.NodeSpec(
        hostname=hostname,
        leaf="leaf-1",
        management_address="198.18.0.10",
        ssh_port=22,
        ssh_user="probe",
        ssh_host_key="",
        gpu_model="H800",
        gpu_count=8,
        ports=(
            services.PortSpec(device="mlx5_0", netdev=netdev, rate_gbps=100, link_layer="Ethernet"),
        ),
    )
    with pytest.raises(ValidationError, match=message):
        services.register_cluster(
            site_code="lab",
            site_name="Lab",
            city="Shenzhen",
            fabric_name="lab",
            technology="roce",
            port_speed_gbps=100,
            topology="leaf_spine",
            oversubscription=Decimal("1"),
            spines=["spine-1"],
            nodes=[spec],
        )
    assert not Node.objects.exists()

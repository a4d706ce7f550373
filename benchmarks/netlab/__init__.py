"""A real multi-host leaf-spine network on one Linux machine, for testing the probes.

Hosts are network namespaces running real sshd; leaves and spine are Linux bridges in a
fabric namespace; links are veths shaped with tc. Needs root. See spec.py for the layout.

    state = up(LabSpec(state_dir=Path("var/netlab")))
    ...
    down("var/netlab")

The switches' SNMP agent runs in the fabric namespace (snmpd.py; address, port and community
in the state). Faults: ``flap`` (link down/up at the switch port), ``forge`` (a host's iperf3
reports a multiple of what it measured), ``forge_link`` (a host's sysfs says its link is
down while it is up); see faults.py.

CLI: ``python -m benchmarks.netlab up|down|status [--state-dir DIR] [--degrade lab-h2=400mbit]``,
``python -m benchmarks.netlab flap HOST [--count N --interval S --down S]``,
``python -m benchmarks.netlab forge HOST [--factor F | --link down|up|off]``
"""

from benchmarks.netlab.faults import carrier_changes, flap, forge, forge_link, forged_factor
from benchmarks.netlab.lab import (
    HostStatus,
    LabStatus,
    down,
    rotate_host_key,
    set_host_rate,
    start_sshd,
    status,
    stop_sshd,
    up,
)
from benchmarks.netlab.shell import check_prerequisites, missing_prerequisites
from benchmarks.netlab.spec import LabError, LabSpec, LabUnavailable, format_rate, parse_rate
from benchmarks.netlab.state import LabHost, LabState, load_state

__all__ = [
    "HostStatus",
    "LabError",
    "LabHost",
    "LabSpec",
    "LabState",
    "LabStatus",
    "LabUnavailable",
    "carrier_changes",
    "check_prerequisites",
    "down",
    "flap",
    "forge",
    "forge_link",
    "forged_factor",
    "format_rate",
    "load_state",
    "missing_prerequisites",
    "parse_rate",
    "rotate_host_key",
    "set_host_rate",
    "start_sshd",
    "status",
    "stop_sshd",
    "up",
]

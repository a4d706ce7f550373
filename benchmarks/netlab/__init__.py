"""A real multi-host leaf-spine network on one Linux machine, for testing the probes.

Hosts are network namespaces running real sshd; leaves and spine are Linux bridges in a
fabric namespace; links are veths shaped with tc. Needs root. See spec.py for the layout.

    state = up(LabSpec(state_dir=Path("var/netlab")))
    ...
    down("var/netlab")

CLI: ``python -m benchmarks.netlab up|down|status [--state-dir DIR] [--degrade lab-h2=400mbit]``
"""

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
    "check_prerequisites",
    "down",
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

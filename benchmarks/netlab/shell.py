"""Running the system tools the lab needs (ip, tc, sshd, ssh-keygen, snmpd) and checking
for them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from benchmarks.netlab.spec import LabError, LabUnavailable

SSHD = "/usr/sbin/sshd"
SNMPD = "/usr/sbin/snmpd"  # Debian package snmpd (net-snmp): the switches' management agent
REQUIRED_TOOLS = ("ip", "tc", "iperf3", "ssh-keygen")


def missing_prerequisites() -> list[str]:
    """Human-readable list of what is missing to run the lab (empty when all is there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root privileges (network namespaces, veth, tc)")
    missing.extend(f"`{tool}`" for tool in REQUIRED_TOOLS if shutil.which(tool) is None)
    if not os.access(SSHD, os.X_OK):
        missing.append(f"OpenSSH server at {SSHD}")
    if not os.access(SNMPD, os.X_OK):
        missing.append(f"net-snmp agent at {SNMPD} (Debian package snmpd)")
    return missing


def check_prerequisites() -> None:
    """Raise LabUnavailable naming everything that is missing."""
    missing = missing_prerequisites()
    if missing:
        raise LabUnavailable(
            "netlab needs root, iproute2 (ip, tc), iperf3, openssh-server and snmpd; missing: "
            + ", ".join(missing)
        )


def run(argv: Sequence[str], *, check: bool = True, timeout_s: float = 30) -> str:
    """Run a tool and return its stdout; raise LabError with its stderr on failure."""
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{' '.join(argv)}: {exc}") from exc
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """``ip [-n NETNS] ARGS...``"""
    prefix = ["ip", "-n", netns] if netns else ["ip"]
    return run([*prefix, *args], check=check)


def tc(*args: str, netns: str | None = None) -> str:
    """``tc [-n NETNS] ARGS...``"""
    prefix = ["tc", "-n", netns] if netns else ["tc"]
    return run([*prefix, *args])


def in_netns(netns: str, *argv: str, check: bool = True) -> str:
    """Run a command inside a namespace (``ip netns exec``)."""
    return run(["ip", "netns", "exec", netns, *argv], check=check)

"""Run commands on cluster nodes: over SSH (production) or locally (demo and lab)."""

from benchmarks.transports.background import BackgroundProcess, NotReady
from benchmarks.transports.base import (
    DEFAULT_MAX_LIFETIME_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    AsyncTransport,
    AuthenticationFailed,
    CommandResult,
    CommandTimeout,
    ConnectionLost,
    HostKeyRejected,
    HostUnreachable,
    Transport,
    TransportError,
)
from benchmarks.transports.local import LocalTransport
from benchmarks.transports.ssh import SSHTarget, SSHTransport, fetch_host_key, fingerprint
from benchmarks.transports.sync import SyncBackgroundProcess, SyncTransport, run_sync

__all__ = [
    "DEFAULT_MAX_LIFETIME_S",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "AsyncTransport",
    "AuthenticationFailed",
    "BackgroundProcess",
    "CommandResult",
    "CommandTimeout",
    "ConnectionLost",
    "HostKeyRejected",
    "HostUnreachable",
    "LocalTransport",
    "NotReady",
    "SSHTarget",
    "SSHTransport",
    "SyncBackgroundProcess",
    "SyncTransport",
    "Transport",
    "TransportError",
    "fetch_host_key",
    "fingerprint",
    "run_sync",
]

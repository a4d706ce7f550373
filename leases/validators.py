"""Rules for the values that end up on a command line or in a file name: hostnames,
addresses, interface and RDMA device names on a node's command line, and lease references
in download names and the portal's copy-paste ``gpulease-verify`` command.

Each ``check_*`` raises ValueError with a sentence naming the value and what is wrong with
it; the model fields use the ``validate_*`` wrappers (admin, API and services refuse the
value), and the probe commands check again before they quote a value (defence in depth).

Interface names follow the kernel's ``dev_valid_name`` (net/core/dev.c): 1-15 bytes, not
"." or "..", no "/", ":" or whitespace. RDMA device names are what ``rdma dev set NAME name``
may give (``nldev_set_doit`` then ``ib_device_rename``): up to IB_DEVICE_NAME_MAX - 1 = 63
bytes, and a sysfs directory name under /sys/class/infiniband. Both are refused a few more
things no real name has: "%" (the kernel expands it as a name template, so no device
carries one), control characters, and a leading "-" (a tool would read it as an option).
"""

import ipaddress
import re
from collections.abc import Callable

from django.core.exceptions import ValidationError

HOSTNAME_MAX = 253
REFERENCE_MAX = 64
LABEL_MAX = 63
INTERFACE_NAME_MAX_BYTES = 15  # IFNAMSIZ - 1
RDMA_DEVICE_NAME_MAX_BYTES = 63  # IB_DEVICE_NAME_MAX - 1

_LABEL = re.compile(r"[A-Za-z0-9-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_REFERENCE_CHARACTER = re.compile(r"[A-Za-z0-9._-]")


def check_hostname(value: str) -> None:
    """RFC 1123: dot-separated labels of 1-63 letters, digits and hyphens, none starting or
    ending with a hyphen, at most 253 characters in all."""
    if not value:
        raise ValueError("a hostname cannot be empty")
    if len(value) > HOSTNAME_MAX:
        raise ValueError(
            f"a hostname has at most {HOSTNAME_MAX} characters; {value[:20]!r}... has {len(value)}"
        )
    for label in value.split("."):
        if not label:
            raise ValueError(f"hostname {value!r} has an empty label (a dot at an end or '..')")
        if not _LABEL.fullmatch(label):
            bad = next(c for c in label if not _LABEL.fullmatch(c))
            raise ValueError(
                f"hostname {value!r} has {bad!r}; only letters, digits, hyphens and dots "
                "are allowed"
            )
        if len(label) > LABEL_MAX:
            raise ValueError(
                f"hostname {value!r} has a label of {len(label)} characters; at most {LABEL_MAX}"
            )
        if label.startswith("-") or label.endswith("-"):
            raise ValueError(f"hostname {value!r} has a label that starts or ends with '-'")


def check_reference(value: str) -> None:
    """A lease's contract reference (ZY-2026-001): ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, a
    letter or digit, then letters, digits, ".", "_" and "-": nothing a shell, a file
    system, an HTTP header or a spreadsheet reads as more than a name."""
    if not value:
        raise ValueError("a contract reference cannot be empty")
    if len(value) > REFERENCE_MAX:
        raise ValueError(
            f"a contract reference has at most {REFERENCE_MAX} characters; "
            f"{value[:20]!r}... has {len(value)}"
        )
    bad = next((c for c in value if not _REFERENCE_CHARACTER.fullmatch(c)), None)
    if bad is not None:
        raise ValueError(
            f"contract reference {value!r} has {bad!r}; only letters, digits, '.', '_' and "
            "'-' are allowed"
        )
    if value[0] in "._-":
        raise ValueError(f"contract reference {value!r} must start with a letter or a digit")


def check_ip_address(value: str) -> None:
    """An IPv4 or IPv6 address without a zone index (``fe80::1%eth0``): the zone is free
    text, and an address on the fabric needs none."""
    if "%" in value:
        raise ValueError(f"{value!r} has a zone index; give the address alone")
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address") from None


def check_host_address(value: str) -> None:
    """An IP address or a hostname: where SSH connects to."""
    try:
        check_ip_address(value)
    except ValueError:
        try:
            check_hostname(value)
        except ValueError as exc:
            reason = f"{value!r} is neither an IP address nor a valid hostname: {exc}"
            raise ValueError(reason) from None


def _check_device_name(value: str, *, kind: str, max_bytes: int) -> None:
    if not value:
        raise ValueError(f"an {kind} cannot be empty")
    size = len(value.encode())
    if size > max_bytes:
        raise ValueError(f"{kind} {value!r} is {size} bytes long; at most {max_bytes}")
    if value in (".", ".."):
        raise ValueError(f"{value!r} cannot be an {kind}")
    bad = next((c for c in value if c in "/:%" or c.isspace()), None)
    if bad is not None:
        raise ValueError(f"{kind} {value!r} has {bad!r}; '/', ':', '%' and whitespace are refused")
    if _CONTROL.search(value):
        raise ValueError(f"{kind} {value!r} has a control character")
    if value.startswith("-"):
        raise ValueError(f"{kind} {value!r} starts with '-', which a tool would take as an option")


def check_interface_name(value: str) -> None:
    """A Linux network interface name (eth0, enp65s0f0np0, bond0.100)."""
    _check_device_name(value, kind="interface name", max_bytes=INTERFACE_NAME_MAX_BYTES)


def check_rdma_device_name(value: str) -> None:
    """An RDMA device name (mlx5_0, ibp12s0, rocep65s0f0). ':' is refused as well: ibstatus
    takes DEVICE:PORT, so a colon in the name would change which port is read."""
    _check_device_name(value, kind="RDMA device name", max_bytes=RDMA_DEVICE_NAME_MAX_BYTES)


def _as_validation_error(check: Callable[[str], None], value: str) -> None:
    try:
        check(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid") from None


def validate_hostname(value: str) -> None:
    _as_validation_error(check_hostname, value)


def validate_host_address(value: str) -> None:
    _as_validation_error(check_host_address, value)


def validate_interface_name(value: str) -> None:
    _as_validation_error(check_interface_name, value)


def validate_rdma_device_name(value: str) -> None:
    _as_validation_error(check_rdma_device_name, value)


def validate_reference(value: str) -> None:
    _as_validation_error(check_reference, value)

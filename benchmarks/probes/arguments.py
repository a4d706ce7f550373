"""Every value a probe command takes from the inventory or its options comes through here:
checked against what it names, then shell-quoted.

The model fields carry the same rules (leases.validators); checking again here means a
value that skipped them (a bulk update, a raw insert, a bug) refuses the command instead of
running on a node. The quoting alone would already keep the value one literal argument.
"""

import shlex
from collections.abc import Callable

from leases import validators


class UnsafeValue(ValueError):
    """A value that must not reach a node's command line: the command is not built."""


Check = Callable[[object], None]


def checked(check: Check, value: object) -> object:
    """``value`` if ``check`` passes it; tests of the quoting alone replace this."""
    try:
        check(value)
    except (ValueError, TypeError) as exc:
        raise UnsafeValue(f"refusing to build the command: {exc}") from None
    return value


def _quoted(check: Check, value: object) -> str:
    return shlex.quote(str(checked(check, value)))


def _string(check: Callable[[str], None]) -> Check:
    def string_check(value: object) -> None:
        if not isinstance(value, str):
            raise TypeError(f"{value!r} is not a string")
        check(value)

    return string_check


def _whole_number(low: int, high: int, what: str) -> Check:
    def number_check(value: object) -> None:
        if type(value) is not int or not low <= value <= high:
            raise ValueError(f"{what} {value!r} is not a whole number from {low} to {high}")

    return number_check


_HOSTNAME = _string(validators.check_hostname)
_ADDRESS = _string(validators.check_ip_address)
_INTERFACE = _string(validators.check_interface_name)
_RDMA_DEVICE = _string(validators.check_rdma_device_name)
_PORT_NUMBER = _whole_number(1, 255, "port number")
_TCP_PORT = _whole_number(1, 65535, "TCP port")


def hostname(value: object) -> str:
    return _quoted(_HOSTNAME, value)


def address(value: object) -> str:
    return _quoted(_ADDRESS, value)


def interface(value: object) -> str:
    return _quoted(_INTERFACE, value)


def rdma_device(value: object) -> str:
    return _quoted(_RDMA_DEVICE, value)


def port_number(value: object) -> str:
    """An RDMA port number (the N of /sys/class/infiniband/DEV/ports/N)."""
    return _quoted(_PORT_NUMBER, value)


def tcp_port(value: object) -> str:
    return _quoted(_TCP_PORT, value)


def count(value: object, *, what: str, low: int = 1, high: int = 1_000_000) -> str:
    return _quoted(_whole_number(low, high, what), value)


def one_of(value: object, allowed: frozenset[str], *, what: str) -> str:
    def member_check(candidate: object) -> None:
        if candidate not in allowed:
            raise ValueError(f"{what} {candidate!r} is not one of {', '.join(sorted(allowed))}")

    return _quoted(member_check, value)

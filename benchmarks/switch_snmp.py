"""Reading a switch's port counters over SNMP (IF-MIB), as the switch-side witness.

The switch counts the bytes on its ports itself; the tenant, who controls the nodes and the
tools on them, cannot change those counts. ``read_ports`` asks the switch's agent (SNMPv2c,
read-only community) for ifName, ifHCInOctets, ifHCOutOctets, ifOperStatus, ifInErrors,
ifOutDiscards and ifLastChange of its ports, with the agent's sysUpTime (ifLastChange is the
sysUpTime at which the port entered its current state). A switch port's *in* octets are the
bytes the attached node sent.

How it reads: one GETBULK walk of ifName (ifXTable) to map names to ifIndex, then GET
requests for the wanted ports' counters, a few ports per request, so that the counters of
one port are read at one instant. Uses pysnmp (the lextudio fork, asyncio high-level API);
``read_ports`` is the synchronous wrapper for Celery workers and scripts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pysnmp.error import PySnmpError
from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData,
    ContextData,
    ObjectIdentity,
    ObjectType,
    SnmpEngine,
    UdpTransportTarget,
    bulk_cmd,
    get_cmd,
)
from pysnmp.proto.errind import RequestTimedOut
from pysnmp.proto.rfc1905 import EndOfMibView, NoSuchInstance, NoSuchObject

log = logging.getLogger(__name__)

# IF-MIB (RFC 2863) columns, indexed by ifIndex.
IF_NAME = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1)
IF_HC_IN_OCTETS = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6)
IF_HC_OUT_OCTETS = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 10)
IF_OPER_STATUS = (1, 3, 6, 1, 2, 1, 2, 2, 1, 8)
IF_IN_ERRORS = (1, 3, 6, 1, 2, 1, 2, 2, 1, 14)
IF_OUT_DISCARDS = (1, 3, 6, 1, 2, 1, 2, 2, 1, 19)
IF_LAST_CHANGE = (1, 3, 6, 1, 2, 1, 2, 2, 1, 9)
SYS_UP_TIME = (1, 3, 6, 1, 2, 1, 1, 3, 0)  # SNMPv2-MIB, a scalar
_COUNTERS = {
    "in_octets": IF_HC_IN_OCTETS,
    "out_octets": IF_HC_OUT_OCTETS,
    "oper_status": IF_OPER_STATUS,
    "in_errors": IF_IN_ERRORS,
    "out_discards": IF_OUT_DISCARDS,
}
# Read with the counters when the agent has them; a port lacking them is still read.
_OPTIONAL = {"last_change": IF_LAST_CHANGE}
_OPER_UP = 1
_MAX_REPETITIONS = 32
_PORTS_PER_GET = 8  # 6 variables each, and sysUpTime: 49 per request, well under a datagram
_MAX_REQUESTS = 1000  # a runaway walk (an agent that never ends its table) stops here


class SwitchUnreachable(Exception):
    """The switch gave no usable answer: no reply in time (down, unreachable, or the
    community was refused: SNMPv2c agents drop such requests without a word), or an error."""


@dataclass(frozen=True)
class SwitchPortReading:
    """One port's IF-MIB counters at one instant, as the switch counts them."""

    if_name: str
    if_index: int
    in_octets: int  # ifHCInOctets: bytes the attached node sent to the switch
    out_octets: int  # ifHCOutOctets: bytes the switch sent to the node
    oper_up: bool  # ifOperStatus == up(1)
    in_errors: int  # ifInErrors
    out_discards: int  # ifOutDiscards
    last_change: int | None = None  # ifLastChange, TimeTicks (1/100 s)
    uptime: int | None = None  # the agent's sysUpTime in the same request, TimeTicks


def read_ports(
    *,
    address: str,
    port: int = 161,
    community: str,
    if_names: Collection[str] | None = None,
    timeout_s: float = 2.0,
    retries: int = 1,
) -> dict[str, SwitchPortReading]:
    """ifName -> reading, for the ports named in ``if_names`` that the switch has (all of its
    ports when ``None``). Each request waits ``timeout_s`` for an answer and is sent at most
    ``retries + 1`` times; the whole read gives up after ``timeout_s * (retries + 2)``.

    Raises SwitchUnreachable. Synchronous (runs its own event loop; from inside a running
    loop, in a private thread): use :func:`read_ports_async` from async code."""
    coroutine = read_ports_async(
        address=address,
        port=port,
        community=community,
        if_names=if_names,
        timeout_s=timeout_s,
        retries=retries,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="switch-snmp") as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def read_ports_async(
    *,
    address: str,
    port: int = 161,
    community: str,
    if_names: Collection[str] | None = None,
    timeout_s: float = 2.0,
    retries: int = 1,
) -> dict[str, SwitchPortReading]:
    """:func:`read_ports` for async code."""
    if timeout_s <= 0 or retries < 0:
        raise ValueError("timeout_s must be positive and retries not negative")
    where = f"{address}:{port}"
    engine = SnmpEngine()
    try:
        async with asyncio.timeout(timeout_s * (retries + 2)):
            reader = _Reader(engine, community, where, timeout_s, retries)
            await reader.open(address, port)
            names = await reader.walk(IF_NAME)
            wanted = {
                index: name
                for index, name in ((i, _text(v)) for i, v in names.items())
                if if_names is None or name in if_names
            }
            return await reader.counters(wanted)
    except TimeoutError:
        raise SwitchUnreachable(
            f"switch {where} did not finish answering within {timeout_s * (retries + 2):g}s"
        ) from None
    except (PySnmpError, OSError) as error:
        raise SwitchUnreachable(f"switch {where}: {error}") from error
    finally:
        engine.close_dispatcher()


class _Reader:
    def __init__(
        self, engine: SnmpEngine, community: str, where: str, timeout_s: float, retries: int
    ):
        self.engine = engine
        self.auth = CommunityData(community, mpModel=1)  # SNMPv2c
        self.where = where
        self.timeout_s = timeout_s
        self.retries = retries
        self.target: UdpTransportTarget | None = None
        self.requests = 0

    async def open(self, address: str, port: int) -> None:
        self.target = await UdpTransportTarget.create(
            (address, port), timeout=self.timeout_s, retries=self.retries
        )

    def _check(self, error_indication: Any, error_status: Any, error_index: Any) -> None:
        self.requests += 1
        if isinstance(error_indication, RequestTimedOut):
            raise SwitchUnreachable(
                f"no answer from switch {self.where} within {self.timeout_s:g}s "
                f"(sent {self.retries + 1} time(s)): it is down or unreachable, or it refused "
                "the community (SNMPv2c agents ignore a wrong community silently)"
            )
        if error_indication:
            raise SwitchUnreachable(f"switch {self.where}: {error_indication}")
        if error_status:
            raise SwitchUnreachable(
                f"switch {self.where} answered with an error: {error_status.prettyPrint()} "
                f"at variable {int(error_index)}"
            )
        if self.requests > _MAX_REQUESTS:
            raise SwitchUnreachable(f"switch {self.where}: more than {_MAX_REQUESTS} requests")

    async def walk(self, column: tuple[int, ...]) -> dict[int, Any]:
        """ifIndex -> value of one table column (GETBULK until the column ends)."""
        found: dict[int, Any] = {}
        cursor = column
        while True:
            result = await bulk_cmd(
                self.engine,
                self.auth,
                self.target,
                ContextData(),
                0,
                _MAX_REPETITIONS,
                ObjectType(ObjectIdentity(cursor)),
                lookupMib=False,
            )
            error_indication, error_status, error_index, var_binds = result
            self._check(error_indication, error_status, error_index)
            if not var_binds:
                return found
            for name, value in var_binds:
                oid = tuple(name)
                if oid[: len(column)] != column or isinstance(value, EndOfMibView):
                    return found
                if oid <= cursor:
                    raise SwitchUnreachable(f"switch {self.where}: OIDs not increasing at {oid}")
                if len(oid) == len(column) + 1:
                    found[oid[-1]] = value
                cursor = oid

    async def counters(self, ports: dict[int, str]) -> dict[str, SwitchPortReading]:
        readings: dict[str, SwitchPortReading] = {}
        indexes = sorted(ports)
        for start in range(0, len(indexes), _PORTS_PER_GET):
            chunk = indexes[start : start + _PORTS_PER_GET]
            var_binds = [ObjectType(ObjectIdentity(SYS_UP_TIME))] + [
                ObjectType(ObjectIdentity((*column, index)))
                for index in chunk
                for column in (*_COUNTERS.values(), *_OPTIONAL.values())
            ]
            result = await get_cmd(
                self.engine, self.auth, self.target, ContextData(), *var_binds, lookupMib=False
            )
            error_indication, error_status, error_index, answers = result
            self._check(error_indication, error_status, error_index)
            values = {tuple(name): value for name, value in answers}
            uptime = values.get(SYS_UP_TIME)
            for index in chunk:
                row: dict[str, Any] = {
                    key: values.get((*column, index)) for key, column in _COUNTERS.items()
                }
                missing = [k for k, v in row.items() if v is None or _absent(v)]
                if missing:
                    log.info("switch %s port %s has no %s", self.where, ports[index], missing)
                    continue
                readings[ports[index]] = SwitchPortReading(
                    if_name=ports[index],
                    if_index=index,
                    in_octets=int(row["in_octets"]),
                    out_octets=int(row["out_octets"]),
                    oper_up=int(row["oper_status"]) == _OPER_UP,
                    in_errors=int(row["in_errors"]),
                    out_discards=int(row["out_discards"]),
                    last_change=_optional_int(values.get((*IF_LAST_CHANGE, index))),
                    uptime=_optional_int(uptime),
                )
        return readings


def _optional_int(value: Any) -> int | None:
    return None if value is None or _absent(value) else int(value)


def _absent(value: Any) -> bool:
    return isinstance(value, NoSuchObject | NoSuchInstance | EndOfMibView)


def _text(value: Any) -> str:
    return bytes(value.asOctets()).decode("utf-8", errors="replace")

"""Reads for probing: a lease's nodes as the planner sees them, and earlier results."""

import uuid
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Max, Q

from benchmarks.choices import ON_DEMAND, Pattern, RunState
from benchmarks.models import SLOT_REACH, ProbeRun
from benchmarks.probes.plan import PlanNode, PlanPort
from gpulease_verify import sweep
from leases.models import NicPort, Node


def plan_nodes(nodes: Iterable[Node], ports: Iterable[NicPort]) -> dict[str, PlanNode]:
    by_node: dict[int, list[PlanPort]] = defaultdict(list)
    for port in ports:
        by_node[port.node_id].append(
            PlanPort(
                device=port.device,
                port=port.port_number,
                netdev=port.netdev,
                address=port.address,
                link_layer=port.link_layer,
                rate_gbps=port.rate_gbps,
            )
        )
    return {
        node.hostname: PlanNode(
            hostname=node.hostname,
            leaf=node.leaf_switch.name,
            gpus=node.gpu_count,
            ports=tuple(sorted(by_node[node.pk], key=lambda p: (p.device, p.port))),
        )
        for node in nodes
    }


# How many earlier link checks a node's previous reading is looked for in, newest first: a
# sweep holds every node, so the one before nearly always has it; a node that could not
# be read for longer than this many checks starts again without a previous count.
PREVIOUS_READS = (2, 32, 512)


def previous_link_down(run: ProbeRun, hostnames: Iterable[str]) -> dict[str, dict[str, int]]:
    """Hostname -> port label -> link-down counter, from each node's last link check that
    parsed before ``run`` (a sweep's node, or a run of that node stored before sweeps), so
    that a counter that moved since then reads as a flap."""
    wanted = set(hostnames)
    earlier = (
        ProbeRun.objects.filter(
            lease_id=run.lease_id,
            kind=run.kind,
            finished_at__isnull=False,
            # the checks before it, newest first down the lease's index by slot, in the
            # months they can be in (not a sort of every check the lease ever had)
            slot_at__lte=run.slot_at,
            slot_at__gte=run.slot_at - SLOT_REACH,
        )
        .filter(Q(pattern=Pattern.SWEEP) | Q(target__in=wanted, state=RunState.OK))
        .exclude(pk=run.pk)
        .order_by("-slot_at", "-id")
        .values_list("pattern", "target", "state", "verdict", "parsed")
    )
    found: dict[str, dict[str, int]] = {}
    read = 0
    for limit in PREVIOUS_READS:
        rows = list(earlier[read:limit])
        for pattern, target, state, verdict, parsed in rows:
            results = sweep.node_results(
                pattern=pattern, target=target, state=state, verdict=verdict, parsed=parsed
            )
            for result in results:
                if result.ok and result.node in wanted and result.node not in found:
                    found[result.node] = {
                        port["label"]: port["link_down_count"]
                        for port in result.parsed.get("ports", [])
                        if port.get("link_down_count") is not None
                    }
        exhausted = len(rows) < limit - read
        read = limit
        if exhausted or wanted <= set(found):
            break
    return found


def pending_on_demand_batches(
    *, lease_id: int, now: datetime, live_claims_after: datetime
) -> list[uuid.UUID]:
    """Every batch, in the order it was queued, of the lease's run-now requests that are not
    over: a request (its runs share one slot) with a run still queued before its deadline or
    claimed by a live worker (claimed after ``live_claims_after``). One row per run."""
    not_over = ProbeRun.objects.filter(lease_id=lease_id, trigger__in=ON_DEMAND).filter(
        Q(state=RunState.SCHEDULED, deadline_at__gt=now)
        | Q(state=RunState.RUNNING, claimed_at__gt=live_claims_after)
    )
    return list(
        ProbeRun.objects.filter(
            lease_id=lease_id, trigger__in=ON_DEMAND, slot_at__in=not_over.values("slot_at")
        )
        .order_by("pk")
        .values_list("batch", flat=True)
    )


def last_on_demand_over_at(*, lease_id: int) -> datetime | None:
    """When the lease's latest run-now run was over, however it ended (finished, skipped
    at once, or missed)."""
    return ProbeRun.objects.filter(
        lease_id=lease_id, trigger__in=ON_DEMAND, finished_at__isnull=False
    ).aggregate(last=Max("finished_at"))["last"]


# --- read by billing, api, portal, monitoring, telemetry ---
# Their homes are the modules named; each module's __all__ is what it offers.
from benchmarks.selectors.billed import *  # noqa: E402, F403
from benchmarks.selectors.runs import *  # noqa: E402, F403

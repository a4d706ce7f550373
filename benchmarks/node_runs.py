"""The dispatcher's node-level runs (link checks, counter readings), created set-based.

They are nine in ten of all runs (every node, every 5 minutes) and all alike: one sweep of
every node a lease holds (``gpulease_verify.sweep``) per lease, kind and slot, in a batch
of its own, with nothing to skip. So the dispatcher only says which (lease, kind, slot) is
due, and PostgreSQL makes the sweeps from the leases' assignments in one statement
(``INSERT ... SELECT``): no node or run is loaded into Python, and the number of queries
does not grow with the fleet. A sweep has no node links: the worker reads every node the
lease holds when it runs (``held_at``: in its last instant, for the closing reading of a
lease that has ended). SQLite (``make run``) makes the same runs through the ORM."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from benchmarks import selectors
from benchmarks.choices import Pattern, RunState
from benchmarks.models import ProbeRun
from benchmarks.probes.plan import NODE_TOOLS, plan_batches
from gpulease_verify import sweep
from leases import selectors as lease_selectors
from leases.choices import LinkLayer
from leases.models import NicPort
from leases.selectors import live_assignments_meeting, sites_among

NODE_KINDS = frozenset(NODE_TOOLS)


@dataclass(frozen=True)
class Due:
    """A node-level kind due for a lease: one sweep of the nodes it holds at ``held_at``
    (None: now; the closing reading of a lease that ended reads those of its last
    instant, ``benchmarks.services.dispatch_due``)."""

    lease_id: int
    kind: str
    slot_at: datetime
    deadline_at: datetime
    trigger: str
    terms_id: int
    held_at: datetime | None = None


Batches = list[tuple[uuid.UUID, str]]  # (batch, the probe queue of its site)


def create(due: Sequence[Due], *, now: datetime) -> Batches:
    """Store the sweeps of ``due``, in the caller's transaction."""
    if not due:
        return []
    if connection.vendor == "postgresql":
        return _create_in_sql(due, now)
    return _create_with_orm(due, now)


# The columns taken from the due rows and the nodes; every other column of a new scheduled
# run is the model's default.
_GIVEN = (
    "lease_id",
    "kind",
    "tool",
    "target",
    "pattern",
    "batch",
    "trigger",
    "slot_at",
    "deadline_at",
    "site_id",
    "terms_id",
    "state",
)


def _create_in_sql(due: Sequence[Due], now: datetime) -> Batches:
    quote = connection.ops.quote_name
    instants = [d.held_at or now for d in due]
    assigned, assigned_params = (
        live_assignments_meeting(
            lease_ids={d.lease_id for d in due}, start=min(instants), end=max(instants)
        )
        .order_by()
        .values(
            "lease_id",
            "node_id",
            "node__hostname",
            "node__leaf_switch__fabric__site_id",
            "assigned_from",
            "assigned_until",
        )
        .query.sql_with_params()
    )
    template = ProbeRun(state=RunState.SCHEDULED)
    defaults = [
        f for f in ProbeRun._meta.concrete_fields if not f.primary_key and f.attname not in _GIVEN
    ]
    columns = [*_GIVEN, *(str(f.column) for f in defaults)]
    # Per lease and instant its nodes are read at (``held_at``): the nodes it holds then,
    # the site of its first node by hostname, and the tool as plan_batches picks it
    # (NODE_TOOLS), by whether any of its nodes has an InfiniBand port.
    sql = f"""
        WITH due AS (
            SELECT * FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[],
                                 %s::timestamptz[], %s::text[], %s::bigint[],
                                 %s::text[], %s::text[], %s::timestamptz[])
                AS d(lease_id, kind, slot_at, deadline_at, trigger, terms_id,
                     infiniband_tool, other_tool, held_at)
        ),
        assigned (lease_id, node_id, hostname, site_id, assigned_from, assigned_until)
            AS ({assigned}),
        held AS (
            SELECT DISTINCT a.lease_id, instants.held_at, a.node_id, a.hostname, a.site_id
            FROM (SELECT DISTINCT lease_id, held_at FROM due) instants
            JOIN assigned a ON a.lease_id = instants.lease_id
                AND a.assigned_from <= instants.held_at
                AND (a.assigned_until IS NULL OR a.assigned_until > instants.held_at)
        ),
        leases AS (
            SELECT lease_id, held_at, (array_agg(site_id ORDER BY hostname))[1] AS site_id,
                   bool_or(EXISTS (SELECT 1 FROM {quote(NicPort._meta.db_table)} p
                                   WHERE p.node_id = held.node_id AND p.link_layer = %s))
                       AS infiniband
            FROM held GROUP BY lease_id, held_at
        )
        INSERT INTO {quote(ProbeRun._meta.db_table)} ({", ".join(quote(c) for c in columns)})
        SELECT due.lease_id, kind,
               CASE WHEN leases.infiniband THEN infiniband_tool ELSE other_tool END,
               %s, %s, gen_random_uuid(), trigger, slot_at, deadline_at, leases.site_id,
               terms_id, %s, {", ".join(f"%s::{f.db_type(connection)}" for f in defaults)}
        FROM due JOIN leases USING (lease_id, held_at)
        RETURNING batch, site_id
    """
    params = [
        [d.lease_id for d in due],
        [d.kind for d in due],
        [d.slot_at for d in due],
        [d.deadline_at for d in due],
        [d.trigger for d in due],
        [d.terms_id for d in due],
        [NODE_TOOLS[d.kind][0] for d in due],
        [NODE_TOOLS[d.kind][1] for d in due],
        instants,
        *assigned_params,
        LinkLayer.INFINIBAND,
        sweep.ALL,
        Pattern.SWEEP,
        RunState.SCHEDULED,
        *(f.get_db_prep_save(getattr(template, f.attname), connection) for f in defaults),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        made = cursor.fetchall()
    queues = {site.pk: site.probe_queue for site in sites_among(pks={s for _, s in made})}
    return [(batch, queues[site_id]) for batch, site_id in made]


def _create_with_orm(due: Sequence[Due], now: datetime) -> Batches:
    held = {
        instant: lease_selectors.lease_nodes_at(
            lease_ids={d.lease_id for d in due if (d.held_at or now) == instant}, at=instant
        )
        for instant in {d.held_at or now for d in due}
    }
    ports = lease_selectors.ports_of(
        nodes=(node for by_lease in held.values() for nodes in by_lease.values() for node in nodes)
    )
    runs: list[ProbeRun] = []
    for item in due:
        nodes = held[item.held_at or now].get(item.lease_id, [])
        if not nodes:
            continue
        plan = selectors.plan_nodes(nodes, [p for p in ports if p.node_id in {n.pk for n in nodes}])
        for planned in plan_batches(kind=item.kind, nodes=list(plan.values()), technology=""):
            for run in planned.runs:
                runs.append(
                    ProbeRun(
                        lease_id=item.lease_id,
                        kind=item.kind,
                        tool=run.tool,
                        target=run.target,
                        pattern=run.pattern,
                        batch=uuid.uuid4(),
                        trigger=item.trigger,
                        slot_at=item.slot_at,
                        deadline_at=item.deadline_at,
                        site=nodes[0].leaf_switch.fabric.site,
                        terms_id=item.terms_id,
                        state=RunState.SCHEDULED,
                    )
                )
    made = ProbeRun.objects.bulk_create(runs, batch_size=1000)
    return [(run.batch, run.site.probe_queue) for run in made]

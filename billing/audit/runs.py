"""The bundle's chain entries and what re-reading them needs: probe runs (with their raw
output on request), bare links, rejudgements, the acceptance attempt billing starts at, the
nodes the runs name and the lease's node assignments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from benchmarks import selectors as run_selectors
from benchmarks.links import rejudgement_link_content, run_content
from benchmarks.models import ProbeRun, Rejudgement, effective_verdict
from benchmarks.selectors import plan_nodes
from gpulease_verify import window as billed_window
from gpulease_verify.bundle import hour_start
from gpulease_verify.canonical import iso_utc
from gpulease_verify.samples import classify_sample, confirmation_key, confirmed_verdict
from leases.models import Lease, LeaseTerms
from leases.selectors import assignment_history, node_ids_ever_assigned, nodes_with_leaf, ports_of


def _run_entry(
    run: ProbeRun,
    zone: str,
    window: tuple[Any, Any],
    start: datetime,
    end: datetime,
    include_raw: bool = False,
    judged_by: LeaseTerms | None = None,
    sent_bytes: dict[str, int] | None = None,
    confirmation: str | None = None,
) -> dict[str, Any]:
    """``judged_by``: the terms version the run counts under (its latest rejudgement's,
    else its own); its outcome is by its effective verdict (``with_effective_judgement``),
    cleared by a ``confirmation`` (that run's effective verdict) that passed.
    ``sent_bytes``: node -> the bytes a finished heavy probe sent, as metering took them
    away (``billing.probe_tax``); derived, not evidence: the verifier re-reads them from
    the run's output where it can."""
    content = run_content(run)
    counted = bool(
        window[0] is not None
        and run.trigger == "schedule"
        and window[0] <= hour_start(run.slot_at) < window[1]
    )
    judged_by = judged_by or run.terms
    outcome = classify_sample(
        state=run.state,
        verdict=confirmed_verdict(effective_verdict(run), confirmation),
        slot_at=run.slot_at,
        maintenance_windows=judged_by.maintenance_windows if judged_by else None,
        zone=zone,
    )
    return {
        "id": run.pk,
        "chain_index": run.chain_index,
        "prev_hash": run.prev_hash,
        "run_hash": run.run_hash,
        "content": content,
        "nodes": run.hostnames(),
        "raw_url": f"/api/v1/probe-runs/{run.pk}/raw/",
        "in_period": start <= run.slot_at < end,
        "sla": {"counted": counted, "outcome": outcome if counted else None},
        **({} if sent_bytes is None else {"sent_bytes": sent_bytes}),
        **(_raw(run) if include_raw else {}),
    }


def sample_key(run: ProbeRun) -> tuple:
    """What a scheduled run shares with its confirmation (``gpulease_verify.samples``)."""
    return confirmation_key(
        kind=run.kind, tool=run.tool, pattern=run.pattern, target=run.target, slot_at=run.slot_at
    )


def _raw(run: ProbeRun) -> dict[str, str]:
    """What the tool printed, so an auditor re-hashes and re-parses it."""
    return {"raw_output": run.raw_output, **({"stderr": run.stderr} if run.stderr else {})}


def _rejudgements_doc(
    lease: Lease, runs: list[ProbeRun], first: int | None, last: int | None
) -> list[Rejudgement]:
    """The rejudgements of the bundle's runs, and any rejudgement whose link lies between
    its first and last run (so the stretch has no gap), in chain order."""
    if first is None or last is None:
        return []
    return run_selectors.linked_rejudgements(
        lease=lease, run_ids=[run.pk for run in runs], first=first, last=last
    )


def _rejudgement_entry(item: Rejudgement) -> dict[str, Any]:
    return {
        "id": item.pk,
        "run": item.run_id,
        "chain_index": item.chain_index,
        "prev_hash": item.prev_hash,
        "rejudgement_hash": item.link_hash,
        "content": rejudgement_link_content(item),
    }


def _link_entry(run: ProbeRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "chain_index": run.chain_index,
        "prev_hash": run.prev_hash,
        "run_hash": run.run_hash,
        "content": run_content(run),
    }


def _acceptance_doc(lease: Lease, accepted: datetime | None) -> dict[str, Any] | None:
    """The runs of the first passing acceptance attempt, as chain links: billing starts at
    their latest finish (``gpulease_verify.window.billing_start``)."""
    if accepted is None:
        return None
    runs = run_selectors.acceptance_links(lease=lease)
    attempts: dict[datetime, list[ProbeRun]] = {}
    for run in runs:
        attempts.setdefault(run.slot_at, []).append(run)
    for slot_at, attempt in sorted(attempts.items()):
        rows = [(run.state, run.verdict, run.finished_at) for run in attempt]
        if billed_window.attempt_passes(rows):
            return {
                "slot_at": iso_utc(slot_at),
                "billing_start": iso_utc(accepted),
                "runs": [_link_entry(run) for run in attempt],
            }
    return None


def _nodes_doc(lease: Lease, runs: list[ProbeRun]) -> dict[str, Any]:
    """Hostname -> leaf, GPUs and ports (now) of every node the lease was assigned or a
    run names: what re-reading a link check's raw output needs."""
    ids = node_ids_ever_assigned(lease=lease)
    ids |= {node.pk for run in runs for node in run.nodes.all()}
    nodes = list(nodes_with_leaf(pks=ids))
    plan = plan_nodes(nodes, ports_of(nodes=nodes))
    return {
        hostname: {
            "leaf": node.leaf,
            "gpus": node.gpus,
            "ports": [
                {
                    "device": port.device,
                    "port": port.port,
                    "netdev": port.netdev,
                    "address": port.address,
                    "link_layer": port.link_layer,
                    "rate_gbps": port.rate_gbps,
                }
                for port in node.ports
            ],
        }
        for hostname, node in sorted(plan.items())
    }


def _assignments_doc(lease: Lease) -> list[dict[str, Any]]:
    """Every node assignment of the lease, void ones flagged: what node rent reads."""
    return [
        {
            "node": item.node.hostname,
            "assigned_from": iso_utc(item.assigned_from),
            "assigned_until": iso_utc(item.assigned_until),
            "void": item.void,
        }
        for item in assignment_history(lease=lease)
    ]

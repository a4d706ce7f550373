"""Contract terms versions as links of a lease's hash chain.

Each terms version is linked into its lease's one chain when it is created, under the same
index sequence as the probe runs (a terms link and run links interleave by index). Its
hash is ``link_hash(terms_content(entry), prev_hash)`` (see ``gpulease_verify.chain``),
where ``terms_content`` is computed from the version's fields as an audit bundle writes
them: the lease reference, version, effective_from, created_at, amendment_reason, every
contract field, and the acknowledgement (or null). A run linked after its terms version
names that version's hash in its content (``terms_hash``).

A version taking effect before it was created (more than ``RETROACTIVE_TOLERANCE`` before,
for clock skew between a client saying "now" and the server) is an after-the-fact
amendment: it counts only if a tenant admin acknowledged it. A lease's first version is the
contract itself, created with the lease, and takes effect when the lease starts; it is not
an amendment and needs no acknowledgement.

Every acknowledgement must come from the lease's tenant: its role admin, its tenant the
bundle's tenant, never provider staff, made after the amendment was proposed and no later
than the version it made was created. The acknowledgement's tenant, staff flag and the
proposal's time are the standing the server recorded with it (``ACKNOWLEDGEMENT_STANDING``,
covered by the bundle's signature, not by the link hash); a bundle written before they
were recorded, or an acknowledgement whose standing could not be recovered, carries them
as null, and only the rest is checked.

This module reads no database: the server and an auditor's ``gpulease-verify`` use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from gpulease_verify import chain
from gpulease_verify.canonical import canonical_json
from gpulease_verify.canonical import parse_instant as _at

RETROACTIVE_TOLERANCE = timedelta(seconds=60)
TENANT_ADMIN = "admin"

# The fields that make up the contract (what an amendment may change); the server's
# LeaseTerms.CONTRACT_FIELDS is this tuple.
CONTRACT_FIELDS = (
    "contracted_bandwidth_gbps",
    "technology",
    "sla_threshold_percent",
    "collective_busbw_floor_gbps",
    "latency_ceiling_us",
    "probe_cadence_s",
    "heavy_probe_policy",
    "heavy_probe_windows",
    "maintenance_windows",
    "incident_after_violations",
    "credit_tiers",
    "credit_cap_percent",
    "credit_base",
    "contracted_base_per_month",
    "billing_mode",
    "node_rent_per_month",
    "network_fee_per_month",
    "price_per_gb",
    "price_per_mbps_p95",
    "tax_rate_percent",
    "rent_tax_rate_percent",
    "billing_starts_on_acceptance",
    "health_thresholds",
    "witness_tolerance_percent",
    "probe_idle_below_percent",
    "telemetry_interval_s",
    "confirm_failures",
    "confirm_pause_s",
    "health_rules",
    "p95_direction",
    "p95_window",
    "degraded_weight",
    "credit_mode",
    "voucher_validity_months",
    "repair_objective_minutes",
    "repair_credit_percent",
)
# Contract fields added after versions were first hashed, each with the field whose value
# it had implicitly before it existed: such a field is in the hashed content only when it
# differs from that field's value. A version hashed before the field existed (the
# migration gave it that value) keeps its hash, in the database and in an older bundle
# that does not carry the field at all; a version where it differs is hashed with it, so
# it cannot be changed unseen. (``tax_rate_percent`` is the network service's VAT rate;
# node rent was taxed at it until ``rent_tax_rate_percent`` existed.)
LATER_FIELDS = {"rent_tax_rate_percent": "tax_rate_percent"}
# Contract fields added later with a fixed default (fabric health, the switch-side witness,
# the probe tax, confirming a failed sample): in the hashed content only when they differ
# from it, so every version hashed before they existed keeps its hash, and an older bundle
# without them reads as the default.
DEFAULTED_FIELDS: dict[str, Any] = {
    "health_thresholds": {},
    "witness_tolerance_percent": "10",
    "probe_idle_below_percent": None,
    "telemetry_interval_s": 30,
    "confirm_failures": True,
    "confirm_pause_s": 5,
    # The fabric health rule set (gpulease_verify.health.RULE_SETS): every version written
    # before set 2 existed is judged by set 1; new versions default to 2 (LeaseTerms).
    "health_rules": 1,
    # 95计费's direction and window (gpulease_verify.calculations.p95_bandwidth): every
    # version before they existed metered what the nodes sent, over the whole month.
    "p95_direction": "tx",
    "p95_window": "monthly",
    # How much of a degraded minute counts as down (gpulease_verify.compliance): 0, a
    # degraded minute is up, as every version written before degraded minutes existed.
    "degraded_weight": "0",
    # How an SLA credit is given (gpulease_verify.vouchers): a negative invoice line, as
    # every version before vouchers existed; a voucher is valid 12 months by default.
    "credit_mode": "line",
    "voucher_validity_months": 12,
    # The repair-time objective and its credit (gpulease_verify.repair): none, as every
    # version before they existed.
    "repair_objective_minutes": None,
    "repair_credit_percent": "0",
}
ACKNOWLEDGEMENT_FIELDS = ("by", "role", "at", "reason")
ACKNOWLEDGEMENT_STANDING = ("tenant", "staff", "proposed_at")


def _scalar(value: Any) -> str | int | bool | None:
    """A field value as content holds it: lists and objects (windows, tiers, cadences) as
    their canonical JSON text; fractional numbers are already text in an entry."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, list | dict):
        return canonical_json(value)
    raise ValueError(f"a terms field holds {type(value).__name__} {value!r}, not JSON text")


def _same_number(a: Any, b: Any) -> bool:
    try:
        return Decimal(str(a)) == Decimal(str(b))
    except (InvalidOperation, ValueError):
        return a == b


def _same_value(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return bool(a == b)
    return _same_number(a, b)


def defaulted_field(entry: Mapping[str, Any], name: str) -> Any:
    """A field of ``DEFAULTED_FIELDS`` as the entry gives it, else its default."""
    return entry.get(name, DEFAULTED_FIELDS[name])


def later_field(entry: Mapping[str, Any], name: str) -> Any:
    """A field of ``LATER_FIELDS`` as the entry gives it, or, from an entry written
    before the field existed, the value of the field it had implicitly."""
    return entry.get(name, entry[LATER_FIELDS[name]])


def terms_content(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What a terms version's hash covers, from its entry (an audit bundle's terms entry,
    or the server's ``terms_fields``). Values are strings, integers, booleans and nulls;
    instants are ISO UTC text as the entry writes them. The acknowledgement becomes four
    keys, all null when there is none. A field of ``LATER_FIELDS`` is left out while it
    equals (as a number) the field it replaces, as versions hashed before it existed were
    hashed without it."""
    ack = entry.get("acknowledgement")
    content: dict[str, Any] = {
        "link": "terms",
        "lease": entry["lease"],
        "version": int(entry["version"]),
        "effective_from": entry["effective_from"],
        "created_at": entry["created_at"],
        "amendment_reason": entry["amendment_reason"],
        **{
            name: _scalar(entry[name])
            for name in CONTRACT_FIELDS
            if name not in LATER_FIELDS and name not in DEFAULTED_FIELDS
        },
    }
    for name, implicit in LATER_FIELDS.items():
        value = later_field(entry, name)
        if not _same_number(value, entry[implicit]):
            content[name] = _scalar(value)
    for name, default in DEFAULTED_FIELDS.items():
        value = defaulted_field(entry, name)
        if not _same_value(value, default):
            content[name] = _scalar(value)
    for name in ACKNOWLEDGEMENT_FIELDS:
        content[f"acknowledged_{name}"] = None if ack is None else ack[name]
    return content


def is_retroactive(effective_from: datetime, created_at: datetime) -> bool:
    """Whether a version took effect before it was created, beyond the clock-skew
    tolerance."""
    return effective_from < created_at - RETROACTIVE_TOLERANCE


def links_in_range(bundle: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The terms entries whose chain index lies within the bundle's chain range (the runs'
    first to last index): they are links of that stretch, checked with the runs."""
    meta = bundle.get("chain") or {}
    first, last = meta.get("first_index"), meta.get("last_index")
    if first is None or last is None:
        return []
    return [
        entry
        for entry in bundle.get("terms", [])
        if isinstance(entry.get("chain_index"), int) and first <= entry["chain_index"] <= last
    ]


def check_acknowledgement(entry: Mapping[str, Any], tenant: str | None) -> list[str]:
    """What is wrong with a terms version's acknowledgement (see the module): who gave it,
    for which tenant, as what, and when. ``tenant`` is the bundle's tenant slug."""
    ack = entry.get("acknowledgement")
    if not isinstance(ack, Mapping):
        return []
    name, by = f"terms v{entry['version']}", ack.get("by")
    problems: list[str] = []
    if ack.get("role") != TENANT_ADMIN:
        problems.append(
            f"{name} was acknowledged by {by} as {ack.get('role')}, not by a tenant admin"
        )
    if ack.get("staff") is True:
        problems.append(
            f"{name} was acknowledged by {by}, a provider staff account: only a tenant admin "
            "can agree for the tenant"
        )
    said = ack.get("tenant")
    if said is not None and tenant is not None and said != tenant:
        problems.append(
            f"{name} was acknowledged by {by} for tenant {said}, not for the lease's tenant "
            f"{tenant}"
        )
    at = _at(ack["at"]) if ack.get("at") else None
    proposed = _at(ack["proposed_at"]) if ack.get("proposed_at") else None
    if at is not None and proposed is not None and at < proposed:
        problems.append(
            f"{name} was acknowledged at {ack['at']}, before its amendment was proposed "
            f"({ack['proposed_at']})"
        )
    if at is not None and at > _at(entry["created_at"]):
        problems.append(
            f"{name} was acknowledged at {ack['at']}, after the version it made was created "
            f"({entry['created_at']})"
        )
    return problems


def _check_entry(
    entry: Mapping[str, Any], reference: str, in_range: bool, tenant: str | None = None
) -> list[str]:
    version = entry["version"]
    name = f"terms v{version}"
    problems: list[str] = []
    missing = [
        key for key in ("chain_index", "prev_hash", "terms_hash", "content") if key not in entry
    ]
    if missing or entry.get("chain_index") is None:
        return [f"{name} is not a link of the chain: {', '.join(missing) or 'chain_index'} missing"]
    if entry.get("lease") != reference:
        problems.append(f"{name} is a version of lease {entry.get('lease')}, not {reference}")
    recomputed = terms_content(entry)
    differ = chain.content_differences(entry["content"], recomputed)
    if differ:
        problems.append(
            f"{name}: its hashed content does not match its fields ({', '.join(differ)})"
        )
    if not in_range:  # a link of the stretch is checked with the runs (verify_chain)
        problems.extend(chain.verify_chain([entry]))
    ack = entry.get("acknowledgement")
    effective_from, created_at = _at(entry["effective_from"]), _at(entry["created_at"])
    if int(version) > 1 and is_retroactive(effective_from, created_at) and ack is None:
        problems.append(
            f"{name} took effect {entry['effective_from']}, before it was created "
            f"({entry['created_at']}), and no tenant admin acknowledged it"
        )
    problems.extend(check_acknowledgement(entry, tenant))
    return problems


def _check_run(run: Mapping[str, Any], terms: Mapping[int, Mapping[str, Any]]) -> list[str]:
    content = run["content"]
    version = content.get("terms_version")
    if version is None:
        return []
    named = content.get("terms_hash")
    entry = terms.get(int(version))
    name = f"chain link {run['chain_index']} (run {run.get('id')})"
    if entry is None:
        return [f"{name} was judged by terms v{version}, which is not in the bundle"]
    if named is None:
        # Runs linked before their terms version was (chains older than terms links)
        # name no terms hash; any later run must.
        if entry.get("chain_index") is not None and entry["chain_index"] < run["chain_index"]:
            return [
                f"{name} names no terms hash, though terms v{version} was linked before it "
                f"(chain link {entry['chain_index']})"
            ]
        return []
    if named != entry.get("terms_hash"):
        return [
            f"{name} was judged by terms v{version} with hash {chain.short(named)}, but the "
            f"bundle's terms v{version} has hash {chain.short(entry.get('terms_hash') or '')}"
        ]
    return []


def check_terms(bundle: Mapping[str, Any]) -> list[str]:
    """Every problem of the bundle's terms versions as links and as the terms its runs
    were judged by; empty when all hold."""
    reference = bundle["lease"]["reference"]
    tenant = (bundle.get("tenant") or {}).get("slug")
    entries: Iterable[Mapping[str, Any]] = bundle.get("terms", [])
    in_range = {id(entry) for entry in links_in_range(bundle)}
    problems: list[str] = []
    for entry in entries:
        problems.extend(_check_entry(entry, reference, id(entry) in in_range, tenant))
    by_version = {int(entry["version"]): entry for entry in bundle.get("terms", [])}
    for run in bundle.get("runs", []):
        problems.extend(_check_run(run, by_version))
    return problems


__all__ = [
    "ACKNOWLEDGEMENT_FIELDS",
    "ACKNOWLEDGEMENT_STANDING",
    "CONTRACT_FIELDS",
    "LATER_FIELDS",
    "RETROACTIVE_TOLERANCE",
    "TENANT_ADMIN",
    "check_acknowledgement",
    "check_terms",
    "is_retroactive",
    "later_field",
    "links_in_range",
    "terms_content",
]

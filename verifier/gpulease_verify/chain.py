"""The hash chain of a lease: tamper evidence for every measurement and every terms version.

Every run that is over (ok, failed, timeout, unreachable, unparsable, missed, skipped)
becomes one link of its lease's chain, once. Links are appended in the order the runs
finished, ``(finished_at, id)``, under a lock on the lease row, so two workers never give
two runs the same index:

- ``chain_index``: 1, 2, 3, ... per lease, without gaps;
- ``prev_hash``: the previous link's ``run_hash``; the first link's is ``GENESIS`` (64 zeros);
- ``run_hash = sha256(prev_hash + canonical_json(run_content(run)))`` in lowercase hex, over
  the UTF-8 bytes of the 64 hex characters of ``prev_hash`` followed by the canonical JSON.

``canonical_json`` is JSON with the keys sorted, no whitespace (``","`` and ``":"``),
non-ASCII characters written as themselves and the whole text encoded as UTF-8. The
content holds only strings, integers, booleans and nulls (see ``run_content``), so any
JSON library reproduces it byte for byte.

Changing anything a link covers (a verdict, the SHA-256 of the raw output, a time) after
the fact changes that run's hash, and every later link names the old one: ``verify_chain``
says which link. An unreachable run whose node may still be retried is not over yet, so it
is linked only when its last attempt has been recorded or its slot has passed.

Terms versions are links of the same chain (see ``gpulease_verify.terms``): a link is a
run or a terms version, both under one index sequence. A run's content holds ``"link":
"run"`` and ``terms_hash`` (the hash of the terms version it was judged by) when that
version was linked before it; runs linked before terms were links lack both keys, so their
hashes stand. In a bundle a run link names its hash ``run_hash``, a terms link
``terms_hash``.

A *rejudgement* is a third kind of link: a run judged again, after the fact, by the terms
version that a retroactive (acknowledged) amendment put in force at its slot. The run's own
link never changes; the rejudgement names it by its hash and says which terms version gave
which verdict (``rejudgement_content``). A run's effective verdict is that of its latest
rejudgement (highest index), else its own. In a bundle a rejudgement link names its hash
``rejudgement_hash``.

A *telemetry batch* is a fourth kind: what one passive telemetry poll stored for the
lease (its nodes' port intervals and the switch readings that witness them,
``telemetry_content``). In a bundle it names its hash ``telemetry_hash``.

A *tenant link* is a fifth kind: a record the tenant made, a key registered or revoked, or
an acknowledgement, acceptance sign-off or dispute with the tenant's signature
(``gpulease_verify.cosign``). In a bundle it names its hash ``tenant_hash``.

This module only computes and reads no database: the server (``ledger.chain``) and an
auditor's ``gpulease-verify`` use the same functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpulease_verify.canonical import canonical_json, iso_utc, number_text

GENESIS = "0" * 64
HASH_RULE = "sha256(prev_hash + canonical_json(content)), UTF-8, lowercase hex"

# The fields of a run that its hash covers, in the order the README lists them.
CONTENT_FIELDS = (
    "lease",
    "kind",
    "tool",
    "target",
    "pattern",
    "trigger",
    "slot_at",
    "deadline_at",
    "started_at",
    "finished_at",
    "state",
    "command",
    "exit_code",
    "raw_sha256",
    "stderr_sha256",
    "output_truncated",
    "parsed",
    "measured_bps",
    "latency_us",
    "verdict",
    "rule",
    "verdict_reason",
    "error",
    "terms_version",
)
# Added to a run's content when its terms version was linked before it.
RUN_TERMS_FIELDS = ("link", "terms_hash")
# What a rejudgement's hash covers ("link" is "rejudgement").
REJUDGEMENT_FIELDS = (
    "link",
    "lease",
    "run_hash",
    "terms_version",
    "terms_hash",
    "verdict",
    "rule",
    "verdict_reason",
    "judged_at",
)
REJUDGEMENT = "rejudgement"


@dataclass(frozen=True)
class TermsRef:
    """What a run's content names of the terms version it was judged by."""

    version: int
    chain_index: int | None
    terms_hash: str


def run_content(run: Mapping[str, Any], *, lease: str, terms: TermsRef | None) -> dict[str, Any]:
    """What a run's hash covers, from its stored values (``run``: column -> value, times
    as aware datetimes, ``parsed`` as JSON values; the server's row or an archive's CSV
    row read back): ``parsed`` as its canonical JSON text, times ISO UTC, ``latency_us``
    as text (``number_text``), the terms version by number, and ``link``/``terms_hash``
    when that version was linked before the run."""
    index = run.get("chain_index")
    named = terms is not None and terms.chain_index is not None and index is not None
    return {
        "lease": lease,
        "kind": run["kind"],
        "tool": run["tool"],
        "target": run["target"],
        "pattern": run["pattern"],
        "trigger": run["trigger"],
        "slot_at": iso_utc(run["slot_at"]),
        "deadline_at": iso_utc(run["deadline_at"]),
        "started_at": iso_utc(run["started_at"]),
        "finished_at": iso_utc(run["finished_at"]),
        "state": run["state"],
        "command": run["command"],
        "exit_code": run["exit_code"],
        "raw_sha256": run["raw_sha256"],
        "stderr_sha256": run["stderr_sha256"],
        "output_truncated": bool(run["output_truncated"]),
        "parsed": None if run["parsed"] is None else canonical_json(run["parsed"]),
        "measured_bps": None if run["measured_bps"] is None else int(run["measured_bps"]),
        "latency_us": number_text(run["latency_us"]),
        "verdict": run["verdict"],
        "rule": run["rule"],
        "verdict_reason": run["verdict_reason"],
        "error": run["error"],
        "terms_version": None if terms is None else terms.version,
        **(
            {"link": "run", "terms_hash": terms.terms_hash}
            if named and terms is not None and terms.chain_index <= index  # type: ignore[operator]
            else {}
        ),
    }


# A telemetry batch: what one poll stored for one lease (``telemetry_content``).
TELEMETRY = "telemetry"
# A record the tenant made: a key event, or a co-signed acknowledgement, acceptance or
# dispute (``gpulease_verify.cosign.tenant_link_content``).
TENANT = "tenant"


def rejudgement_content(
    *,
    lease: str,
    run_hash: str,
    terms_version: int,
    terms_hash: str,
    verdict: str,
    rule: str,
    verdict_reason: str,
    judged_at: str,
) -> dict[str, Any]:
    """What a rejudgement's hash covers: the lease reference, the hash of the run judged
    again, the terms version (number and link hash) it was judged by, the verdict, rule and
    reason that version gives the run's stored figures, and when (ISO UTC text)."""
    return {
        "link": REJUDGEMENT,
        "lease": lease,
        "run_hash": run_hash,
        "terms_version": int(terms_version),
        "terms_hash": terms_hash,
        "verdict": verdict,
        "rule": rule,
        "verdict_reason": verdict_reason,
        "judged_at": judged_at,
    }


def telemetry_content(
    *,
    lease: str,
    at: str,
    samples: Iterable[Mapping[str, Any]],
    switch: Iterable[Mapping[str, Any]],
    cleared: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """What a telemetry batch's hash covers: the lease reference, the poll instant (ISO
    UTC text), every port interval the poll stored for the lease's nodes
    (``gpulease_verify.telemetry.sample_entry``, ordered by node, port and end) and the
    switch readings stored with them (``switch_entry``, ordered by switch and port).
    A batch that records an operator clearing ports (``clearance_entry``) holds them
    under ``cleared`` (left out when there are none, as in every batch before it
    existed)."""
    content = {
        "link": TELEMETRY,
        "lease": lease,
        "at": at,
        "samples": sorted(samples, key=lambda s: (s["node"], s["port"], s["at"])),
        "switch": sorted(switch, key=lambda r: (r["switch"], r["port"])),
    }
    clearances = sorted(cleared, key=lambda c: (c["node"], c["port"], c["at"]))
    if clearances:
        content["cleared"] = clearances
    return content


def clearance_entry(*, node: str, port: str, at: str, by: str, reason: str) -> dict[str, Any]:
    """An operator's clearance of a port's sticky flap and drop findings (gpud's
    set-healthy), as a telemetry batch holds it: who, when (ISO UTC text) and why."""
    return {"node": node, "port": port, "at": at, "by": by, "reason": reason}


def link_hash(content: Mapping[str, Any], prev: str) -> str:
    """``sha256(prev + canonical_json(content))`` as lowercase hex."""
    return hashlib.sha256((prev + canonical_json(content)).encode("utf-8")).hexdigest()


# How a bundle entry names its hash and its id, per kind of link.
_ENTRY_KINDS = (
    ("tenant_hash", "tenant_link_id", "id"),
    ("telemetry_hash", "telemetry_id", "id"),
    ("rejudgement_hash", "rejudgement_id", "id"),
    ("run_hash", "run_id", "id"),
    ("terms_hash", "terms_version", "version"),
)


@dataclass(frozen=True)
class Link:
    """One link as stored (or as written in an audit bundle): a run, a terms version, a
    rejudgement or a telemetry batch. ``run_hash`` is the link's hash whichever it is."""

    index: int
    prev_hash: str
    run_hash: str
    content: Mapping[str, Any]
    run_id: int | None = None
    terms_version: int | None = None
    rejudgement_id: int | None = None
    telemetry_id: int | None = None
    tenant_link_id: int | None = None

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Link:
        """From an audit bundle's run entry (``chain_index``, ``prev_hash``, ``run_hash``,
        ``content``, ``id``), terms entry (``terms_hash`` and ``version`` in place of
        ``run_hash`` and ``id``), rejudgement entry (``rejudgement_hash``, ``id``) or
        telemetry entry (``telemetry_hash``, ``id``)."""
        for hash_key, id_field, id_key in _ENTRY_KINDS:
            if hash_key in entry:
                return cls(
                    index=entry["chain_index"],
                    prev_hash=entry["prev_hash"],
                    run_hash=entry[hash_key],
                    content=entry["content"],
                    **{id_field: entry.get(id_key)},
                )
        raise KeyError("a chain link entry names no hash (run_hash, terms_hash, ...)")

    @property
    def is_terms(self) -> bool:
        return self.terms_version is not None or self.content.get("link") == "terms"

    @property
    def is_rejudgement(self) -> bool:
        return self.rejudgement_id is not None or self.content.get("link") == REJUDGEMENT

    @property
    def is_telemetry(self) -> bool:
        return self.telemetry_id is not None or self.content.get("link") == TELEMETRY

    @property
    def is_tenant(self) -> bool:
        return self.tenant_link_id is not None or self.content.get("link") == TENANT

    def what(self) -> str:
        """What the link records, for sentences."""
        if self.is_tenant:
            return "tenant record"
        if self.is_terms:
            return "terms version"
        if self.is_telemetry:
            return "telemetry batch"
        return REJUDGEMENT if self.is_rejudgement else "run"

    def name(self) -> str:
        if self.tenant_link_id is not None:
            return f"chain link {self.index} (tenant record {self.tenant_link_id})"
        if self.telemetry_id is not None:
            return f"chain link {self.index} (telemetry batch {self.telemetry_id})"
        if self.rejudgement_id is not None:
            return f"chain link {self.index} (rejudgement {self.rejudgement_id})"
        if self.terms_version is not None:
            return f"chain link {self.index} (terms v{self.terms_version})"
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f"chain link {self.index}{run}"


def short(digest: str) -> str:
    return f"{digest[:16]}…" if len(digest) > 16 else digest or "(empty)"


def verify_chain(links: Iterable[Link | Mapping[str, Any]]) -> list[str]:
    """Every problem of a stretch of consecutive links (runs, terms versions and
    rejudgements), as sentences; empty when it holds.

    Checks, in index order: the indexes are contiguous; the first link of a chain (index 1)
    starts from ``GENESIS``; each ``prev_hash`` is the previous link's ``run_hash``; each
    ``run_hash`` recomputes from its content and ``prev_hash``. The first link of a segment
    that does not start at index 1 is anchored on its own ``prev_hash``, which only an
    earlier segment can confirm."""
    items = [link if isinstance(link, Link) else Link.from_dict(link) for link in links]
    items.sort(key=lambda link: link.index)
    problems: list[str] = []
    previous: Link | None = None
    for link in items:
        if previous is None:
            if link.index == 1 and link.prev_hash != GENESIS:
                problems.append(
                    f"{link.name()} is the first of the chain but its previous hash is "
                    f"{short(link.prev_hash)}, not the genesis hash (64 zeros)"
                )
        else:
            if link.index != previous.index + 1:
                problems.append(
                    f"{link.name()} follows chain link {previous.index}: "
                    f"{link.index - previous.index - 1} link(s) are missing"
                    if link.index > previous.index + 1
                    else f"{link.name()} repeats chain index {link.index}"
                )
            elif link.prev_hash != previous.run_hash:
                problems.append(
                    f"{link.name()} names {short(link.prev_hash)} as the previous hash, but "
                    f"{previous.name()} has hash {short(previous.run_hash)}"
                )
        recomputed = link_hash(link.content, link.prev_hash)
        if recomputed != link.run_hash:
            problems.append(
                f"{link.name()}: stored hash {short(link.run_hash)} does not match its "
                f"content (recomputed {short(recomputed)}); the "
                f"{link.what()} was changed after it was recorded"
            )
        previous = link
    return problems


def content_differences(stated: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The fields of two contents that differ, for saying what changed."""
    keys = sorted(set(stated) | set(actual))
    return [key for key in keys if stated.get(key) != actual.get(key)]

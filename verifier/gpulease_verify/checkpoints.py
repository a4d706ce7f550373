"""Signed chain checkpoints: the anchors that make a dropped or re-hashed tail visible.

At each period's close the provider signs, for every billed lease, the head of its chain:
the last link of a run whose slot lies in the period or earlier. The tenant keeps it (API,
webhook, portal). A checkpoint is the signed document

    {"checkpoint": {...}, "signature": base64, "key_id": "sha256:…", "public_key": base64,
     "algorithm": "Ed25519"}

whose ``checkpoint`` is ``payload(...)`` below, signed as its canonical JSON.

A bundle carries the lease's checkpoints of its period and every earlier one, and
``check_bundle`` checks each against the bundle's links; ``--previous FILE`` (an earlier
checkpoint or signed bundle the auditor kept) is checked the same way, except that an
anchor this bundle can neither see nor confirm is a mismatch rather than a note."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpulease_verify.canonical import canonical_json
from gpulease_verify.canonical import parse_instant as _at
from gpulease_verify.chain import GENESIS
from gpulease_verify.trust import Trust

FORMAT = "gpulease-chain-checkpoint/1"


def payload(
    *,
    lease: str,
    period: str,
    head_index: int,
    head_hash: str,
    period_links: int,
    signed_at: str,
    key: str,
) -> dict[str, Any]:
    """What a checkpoint signs. ``head`` index 0 with the genesis hash: no link yet.
    ``links``: links in the chain up to the head (its index, as indexes have no gaps);
    ``period_links``: links up to the head of runs whose slot lies in the period."""
    return {
        "format": FORMAT,
        "lease": lease,
        "period": period,
        "head": {"index": head_index, "hash": head_hash},
        "links": head_index,
        "period_links": period_links,
        "signed_at": signed_at,
        "key": key,
    }


def signed_bytes(checkpoint: Mapping[str, Any]) -> bytes:
    return canonical_json(checkpoint).encode("utf-8")


def _short(digest: str) -> str:
    return f"{digest[:8]}…" if len(digest) > 8 else digest


@dataclass(frozen=True)
class Anchor:
    """A link an earlier signed document vouches for."""

    label: str  # "checkpoint of 2026-11", "earlier bundle of 2026-11"
    index: int
    hash: str
    period: str | None = None
    period_links: int | None = None

    def lead(self) -> str:
        return f"the {self.label} names link {self.index} with hash {_short(self.hash)}"


@dataclass(frozen=True)
class Links:
    """The links a bundle carries (runs, and terms versions and rejudgements where the
    chain has them)."""

    by_index: dict[int, tuple[str, str]]  # index -> (hash, prev_hash)
    head: tuple[int, str] | None

    @classmethod
    def of(cls, bundle: Mapping[str, Any]) -> Links:
        found: dict[int, tuple[str, str]] = {}
        carried = [*bundle.get("runs", []), *bundle.get("terms", [])]
        for entry in [*carried, *bundle.get("rejudgements", [])]:
            index = entry.get("chain_index")
            if isinstance(index, int):
                digest = (
                    entry.get("run_hash")
                    or entry.get("terms_hash")
                    or entry.get("rejudgement_hash")
                    or ""
                )
                found[index] = (digest, entry.get("prev_hash") or "")
        head = (bundle.get("chain") or {}).get("head")
        return cls(found, (head["index"], head["hash"]) if head else None)

    @property
    def first(self) -> int | None:
        return min(self.by_index) if self.by_index else None

    @property
    def last(self) -> int | None:
        return max(self.by_index) if self.by_index else None


def head_problems(links: Links) -> list[str]:
    """The bundle's chain head (the lease's last link when it was built) against its links."""
    last = links.last
    if links.head is None:
        return [] if last is None else [f"the bundle carries link {last} but names no chain head"]
    index, digest = links.head
    if last is not None and index < last:
        return [f"the bundle's chain head is link {index}, yet it carries link {last}"]
    if index in links.by_index and links.by_index[index][0] != digest:
        return [
            f"the bundle's chain head names link {index} with hash {_short(digest)}, but that "
            f"link has hash {_short(links.by_index[index][0])}"
        ]
    return []


def anchor_problems(
    anchor: Anchor, links: Links, confirmations: list[Anchor], *, strict: bool
) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of one anchor against a bundle's links. ``confirmations``: the
    bundle's own checkpoints, which vouch for links before its first one."""
    first, last = links.first, links.last
    lead = anchor.lead()
    if anchor.index in links.by_index:
        digest = links.by_index[anchor.index][0]
        if digest != anchor.hash:
            return [
                f"{lead}; this bundle's link {anchor.index} has hash {_short(digest)}: the "
                "chain was rewritten after it was signed"
            ], []
        later = [index for index in links.by_index if index > anchor.index]
        if later and min(later) != anchor.index + 1:
            # A terms link carried for its content can stand alone: the links after it up to
            # the next one carried are what an insider deleting the period's first runs
            # would take away.
            gap = f"links {anchor.index + 1}..{min(later) - 1}"
            if strict:
                return [
                    f"{lead}; this bundle carries that link but not {gap} after it, up to its "
                    f"link {min(later)}: links were removed, or check it against a checkpoint "
                    "of a nearer period"
                ], []
            return [], [f"{anchor.label}: {gap} after it are outside this bundle"]
        return [], [f"{anchor.label}: link {anchor.index} is in this bundle with that hash"]
    if anchor.index + 1 in links.by_index:
        after = anchor.index + 1
        prev = links.by_index[after][1]
        if prev != anchor.hash:
            return [
                f"{lead}; this bundle's link {after} names previous hash {_short(prev)}: the "
                "chain was rewritten after it was signed"
            ], []
        return [], [f"{anchor.label}: this bundle's link {after} follows it"]
    if anchor.index == 0:
        if anchor.hash != GENESIS:
            return [f"{lead}, but link 0 is the genesis hash (64 zeros)"], []
        return [], [f"{anchor.label}: no link yet"]
    head_index = links.head[0] if links.head else 0
    if anchor.index > head_index:
        return [f"{lead}; this bundle's chain ends at link {head_index}: links were removed"], []
    if links.head is not None and anchor.index == head_index:
        if links.head[1] != anchor.hash:
            return [
                f"{lead}; this bundle's chain head, link {head_index}, has hash "
                f"{_short(links.head[1])}: the chain was rewritten after it was signed"
            ], []
        return [], [f"{anchor.label}: it is this bundle's chain head"]
    for other in confirmations:
        if other.index == anchor.index:
            if other.hash != anchor.hash:
                return [
                    f"{lead}; this bundle's {other.label} names hash {_short(other.hash)} for "
                    "that link: the chain was rewritten after it was signed"
                ], []
            return [], [f"{anchor.label}: this bundle's {other.label} confirms it"]
    span = f"links {first}..{last}" if first is not None else "no links"
    if strict:
        return [
            f"{lead}; this bundle carries {span} and no checkpoint of link {anchor.index}, so "
            "it cannot confirm it: check it against a checkpoint or bundle of a nearer period"
        ], []
    return [], [f"{anchor.label}: link {anchor.index} is outside this bundle ({span})"]


def period_problems(anchor: Anchor, bundle: Mapping[str, Any], links: Links) -> list[str]:
    """The checkpoint of the bundle's own period: its head is the period's last link or
    earlier, and as many of the period's runs are linked up to it as it counts."""
    problems = []
    runs = [
        e["chain_index"] for e in bundle.get("runs", []) if isinstance(e.get("chain_index"), int)
    ]
    last = max(runs) if runs else None
    if last is not None and anchor.index > last:
        problems.append(
            f"{anchor.lead()}; this bundle's links of {anchor.period} end at link {last}: "
            "links were removed"
        )
    period = bundle["period"]
    start, end = _at(period["start"]), _at(period["end"])
    counted = sum(
        1
        for entry in bundle.get("runs", [])
        if isinstance(entry.get("chain_index"), int)
        and entry["chain_index"] <= anchor.index
        and start <= _at(entry["content"]["slot_at"]) < end
    )
    if anchor.period_links is not None and counted != anchor.period_links:
        problems.append(
            f"the {anchor.label} counts {anchor.period_links} run link(s) of the period up to "
            f"link {anchor.index}; this bundle has {counted}"
        )
    return problems


def read_checkpoint(
    doc: Mapping[str, Any], trust: Trust, lease: str
) -> tuple[Anchor | None, list[str], list[str]]:
    """(anchor, mismatches, notes) of a signed checkpoint document of ``lease``."""
    body = doc.get("checkpoint") if isinstance(doc, Mapping) else None
    if not isinstance(body, Mapping) or body.get("format") != FORMAT:
        return None, [f"a checkpoint is not a {FORMAT} document"], []
    try:
        label = f"checkpoint of {body['period']}"
        anchor = Anchor(
            label,
            int(body["head"]["index"]),
            str(body["head"]["hash"]),
            str(body["period"]),
            body.get("period_links"),
        )
        signed_at = body["signed_at"]
    except (KeyError, TypeError, ValueError) as error:
        return None, [f"a checkpoint is malformed: {type(error).__name__} {error}"], []
    mismatches, notes = trust.check(doc, signed_bytes(body), what=f"the {label}", at=signed_at)
    if body.get("lease") != lease:
        mismatches.append(f"the {label} is of lease {body.get('lease')}, not {lease}")
    if body.get("links") != anchor.index:
        mismatches.append(f"the {label} counts {body.get('links')} links up to link {anchor.index}")
    return anchor, mismatches, notes


def previous_anchor(
    doc: Mapping[str, Any], trust: Trust, lease: str, signed: bytes | None
) -> tuple[Anchor | None, list[str], list[str]]:
    """The anchor of ``--previous``: a checkpoint, or an earlier signed bundle's head (its
    last link). ``signed``: the earlier bundle's canonical bytes, when it is a bundle."""
    if "checkpoint" in doc:
        return read_checkpoint(doc, trust, lease)
    earlier = doc.get("bundle")
    if not isinstance(earlier, Mapping) or signed is None:
        return None, ["the earlier file is neither a checkpoint nor a signed bundle"], []
    period = (earlier.get("period") or {}).get("period")
    label = f"earlier bundle of {period}"
    mismatches, notes = trust.check(
        doc, signed, what=f"the {label}", at=earlier.get("generated_at")
    )
    if (earlier.get("lease") or {}).get("reference") != lease:
        mismatches.append(
            f"the {label} is of lease {(earlier.get('lease') or {}).get('reference')}, not {lease}"
        )
    links = Links.of(earlier)
    if links.last is not None:
        return Anchor(label, links.last, links.by_index[links.last][0]), mismatches, notes
    if links.head is not None:
        return Anchor(label, *links.head), mismatches, notes
    return None, [*mismatches, f"the {label} names no link to compare"], notes


def check_bundle(
    bundle: Mapping[str, Any],
    trust: Trust,
    previous: Mapping[str, Any] | None = None,
    previous_signed: bytes | None = None,
) -> tuple[list[str], list[str]]:
    """(mismatches, notes): the bundle's head, every checkpoint it carries and, when given,
    the earlier checkpoint or bundle the auditor kept."""
    lease = bundle["lease"]["reference"]
    links = Links.of(bundle)
    mismatches = head_problems(links)
    notes: list[str] = []
    carried: list[Anchor] = []
    for doc in bundle.get("checkpoints", []):
        anchor, bad, said = read_checkpoint(doc, trust, lease)
        mismatches += bad
        notes += said
        if anchor is not None:
            carried.append(anchor)
    periods = [anchor.period for anchor in carried]
    for period in sorted({p for p in periods if periods.count(p) > 1}, key=str):
        mismatches.append(f"the bundle carries more than one checkpoint of {period}")
    for anchor in carried:
        bad, said = anchor_problems(anchor, links, [], strict=False)
        mismatches += bad
        notes += said
        if anchor.period == bundle["period"]["period"]:
            mismatches += period_problems(anchor, bundle, links)
    if previous is not None:
        anchor, bad, said = previous_anchor(previous, trust, lease, previous_signed)
        mismatches += bad
        notes += said
        if anchor is not None:
            bad, said = anchor_problems(anchor, links, carried, strict=True)
            mismatches += bad
            notes += said
    notes.append(f"checkpoints: {len(carried)} checked")
    return mismatches, notes

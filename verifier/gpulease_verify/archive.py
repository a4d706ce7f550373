"""``gpulease-verify-archive ARCHIVE``: check a gpulease month archive with no database.

An archive (written by gpulease's retention, ``common.archives``) is a tar file holding
``manifest.json`` and each table's rows of one UTC month as zstd-compressed CSV. This
checks, from the file alone:

- every file the manifest names is there, with its SHA-256 (compressed and plain) and its
  row count, and nothing else is;
- every run is of the month, by its slot;
- every linked run's row gives its ``run_hash``: its content (``gpulease_verify.chain.
  run_content``, with the lease reference and terms versions the manifest names) hashed
  with its ``prev_hash``, so a row edited after it was linked is named;
- each lease's chain links in the month (its runs, and the links the database kept, whose
  hashes the manifest carries) follow one another: a link's previous hash is the hash of
  the link before it, with no index missing from the first to the last;
- every signed chain checkpoint carried verifies with the trusted key, and one whose head
  lies in the month names that link's hash.

Exit status 0 when all agree, 1 on a mismatch, 2 when the file cannot be read or no key is
trusted. An audit bundle the provider builds from the archive is checked in full (every
verdict re-judged, every figure recomputed) by ``gpulease-verify``."""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
import tarfile
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

from gpulease_verify.chain import TermsRef, link_hash, run_content
from gpulease_verify.checkpoints import read_checkpoint
from gpulease_verify.report import report
from gpulease_verify.trust import NoTrustedKey, Trust

FORMAT = "gpulease-archive/1"
AGREED = "the archive agrees with its manifest and its checkpoints"
RUNS = "benchmarks_proberun"


class ArchiveError(ValueError):
    """The archive cannot be read, or a file does not match its manifest."""


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency of this package
        raise ArchiveError("reading an archive needs the zstandard package") from None
    return zstandard


def _rows(tar: tarfile.TarFile, member: str) -> tuple[IO[bytes], Any]:
    stream = tar.extractfile(member)
    if stream is None:
        raise ArchiveError(f"{member} is not a file in the archive")
    return stream, _zstd().ZstdDecompressor().stream_reader(stream)


def _digest(tar: tarfile.TarFile, member: str) -> tuple[str, str, int]:
    """(sha256 of the compressed file, sha256 of the CSV, data rows)."""
    stream = tar.extractfile(member)
    if stream is None:
        raise ArchiveError(f"{member} is not a file in the archive")
    packed_hash = hashlib.sha256()
    while chunk := stream.read(1 << 20):
        packed_hash.update(chunk)
    packed = packed_hash.hexdigest()
    stream.seek(0)
    plain = hashlib.sha256()
    reader = _zstd().ZstdDecompressor().stream_reader(stream)
    lines = io.TextIOWrapper(io.BufferedReader(_Tee(reader, plain)), encoding="utf-8", newline="")
    try:
        rows = max(sum(1 for _ in csv.reader(lines)) - 1, 0)
    except (csv.Error, UnicodeDecodeError, _zstd().ZstdError) as error:
        raise ArchiveError(f"{member} cannot be read: {error}") from None
    return packed, plain.hexdigest(), rows


class _Tee(io.RawIOBase):
    """A readable stream that hashes what passes through it."""

    def __init__(self, source: Any, sink: Any) -> None:
        self.source, self.sink = source, sink

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.source.read(len(buffer))
        self.sink.update(data)
        buffer[: len(data)] = data
        return len(data)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the archive at ``path``, once every file it names matches its
    hashes and row count. Raises ``ArchiveError`` otherwise."""
    try:
        tar = tarfile.open(path, "r")  # noqa: SIM115 - closed by the with below
    except (OSError, tarfile.TarError) as error:
        raise ArchiveError(f"cannot read {path}: {error}") from None
    with tar:
        try:
            handle = tar.extractfile("manifest.json")
            manifest = json.loads(handle.read()) if handle else None
        except (KeyError, ValueError) as error:
            raise ArchiveError(f"{path} has no readable manifest.json: {error}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ArchiveError(f"{path} is not a {FORMAT} archive")
        files = manifest.get("files") or {}
        names = set(tar.getnames()) - {"manifest.json"}
        if names != set(files):
            extra, absent = sorted(names - set(files)), sorted(set(files) - names)
            raise ArchiveError(f"{path}: files not in the manifest {extra}, missing {absent}")
        for member, info in files.items():
            packed, plain, rows = _digest(tar, member)
            if packed != info.get("file_sha256") or plain != info.get("sha256"):
                raise ArchiveError(f"{member}: its SHA-256 is not the manifest's")
            if rows != info.get("rows"):
                raise ArchiveError(f"{member}: {rows} rows, the manifest says {info.get('rows')}")
    return manifest


class Kept(NamedTuple):
    """What the link checks need of a run (a month holds millions: a tuple, not a dict)."""

    id: str
    lease_id: str
    slot_at: str
    chain_index: str
    prev_hash: str
    run_hash: str


_TIMES = ("slot_at", "deadline_at", "started_at", "finished_at")
_INTEGERS = ("exit_code", "measured_bps", "chain_index")


def _instant(text: str) -> datetime:
    """PostgreSQL's ``2025-10-03 12:05:00+00`` or ISO's ``2025-10-01T00:00:00Z``."""
    text = text.replace("Z", "+00:00")
    return datetime.fromisoformat(text + ":00" if text[-3] in "+-" else text)


def _stored(row: dict[str, str]) -> dict[str, Any]:
    """A run's CSV row (PostgreSQL's CSV: an empty field is NULL; no nullable column of a
    run holds an empty text) as the values its content is made of."""
    values: dict[str, Any] = dict(row)
    for name in _TIMES:
        values[name] = _instant(row[name]) if row[name] else None
    for name in _INTEGERS:
        values[name] = int(row[name]) if row[name] else None
    values["latency_us"] = float(row["latency_us"]) if row["latency_us"] else None
    values["parsed"] = json.loads(row["parsed"]) if row["parsed"] else None
    values["output_truncated"] = row["output_truncated"] == "t"
    return values


class _Rehash:
    """Recomputes each linked run's hash from its row (module docstring)."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self.references = manifest.get("references")
        self.terms = {
            key: TermsRef(int(t["version"]), t["chain_index"], str(t["terms_hash"]))
            for key, t in (manifest.get("terms") or {}).items()
        }
        self.checked = 0
        self.mismatches: list[str] = []

    def __call__(self, row: dict[str, str]) -> None:
        if self.references is None or not row["chain_index"]:
            return
        name = f"run {row['id']} (lease {row['lease_id']}, link {row['chain_index']})"
        reference = self.references.get(row["lease_id"])
        terms = self.terms.get(row["terms_id"]) if row["terms_id"] else None
        if reference is None or (row["terms_id"] and terms is None):
            self.mismatches.append(f"{name}: the manifest does not name its lease or terms")
            return
        try:
            content = run_content(_stored(row), lease=reference, terms=terms)
        except (KeyError, ValueError) as error:
            self.mismatches.append(f"{name}: its row cannot be read: {error}")
            return
        self.checked += 1
        if link_hash(content, row["prev_hash"]) != row["run_hash"]:
            self.mismatches.append(
                f"{name}: its row does not give its run_hash: it was changed after it was linked"
            )


def _runs(path: Path, manifest: dict[str, Any], rehash: _Rehash) -> list[Kept]:
    member = next((m for m, i in manifest["files"].items() if i["table"] == RUNS), None)
    if member is None:
        return []
    with tarfile.open(path, "r") as tar:
        _stream, reader = _rows(tar, member)
        text = io.TextIOWrapper(reader, encoding="utf-8", newline="")
        kept: list[Kept] = []
        for row in csv.DictReader(text):
            rehash(row)
            kept.append(Kept(*(row[name] for name in Kept._fields)))
        return kept


def check(path: str | Path, trust: Trust) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of the archive at ``path``."""
    path = Path(path)
    try:
        manifest = read_manifest(path)
    except ArchiveError as error:
        return [str(error)], []
    month, start, end = manifest["month"], manifest["start"], manifest["end"]
    notes = [
        f"{member}: {info['rows']} rows, SHA-256 as the manifest says"
        for member, info in manifest["files"].items()
    ]
    mismatches: list[str] = []
    rehash = _Rehash(manifest)
    runs = _runs(path, manifest, rehash)
    mismatches += rehash.mismatches
    if rehash.references is None:
        notes.append("run hashes not recomputed: the manifest names no lease references")
    else:
        notes.append(f"{rehash.checked} run(s): each row gives its run_hash")
    lo, hi = _instant(start), _instant(end)
    for run in runs:
        if not lo <= _instant(run.slot_at) < hi:
            mismatches.append(f"run {run.id} has its slot {run.slot_at} outside {month}")
    links: dict[int, dict[int, tuple[str, str, str]]] = defaultdict(dict)
    for run in runs:
        if run.chain_index:
            links[int(run.lease_id)][int(run.chain_index)] = (
                "run",
                run.prev_hash,
                run.run_hash,
            )
    for kept in manifest.get("links_kept", []):
        links[int(kept["lease_id"])][int(kept["index"])] = (
            kept["kind"],
            kept["prev"],
            kept["hash"],
        )
    for lease, chain in sorted(links.items()):
        indexes = sorted(chain)
        missing = sorted(set(range(indexes[0], indexes[-1] + 1)) - set(indexes))
        if missing:
            mismatches.append(f"lease {lease}: chain links {missing[:5]} are missing")
        for index in indexes[1:]:
            if index - 1 in chain and chain[index][1] != chain[index - 1][2]:
                mismatches.append(
                    f"lease {lease}: link {index} ({chain[index][0]}) does not follow link "
                    f"{index - 1}: the chain is broken there"
                )
        notes.append(f"lease {lease}: links {indexes[0]} to {indexes[-1]} follow one another")
    for doc in manifest.get("checkpoints", []):
        body = doc.get("checkpoint") or {}
        lease = doc.get("lease_id")
        anchor, wrong, said = read_checkpoint(doc, trust, str(body.get("lease")))
        mismatches += wrong
        notes += said
        if anchor is None:
            continue
        held = links.get(int(lease or 0), {}).get(anchor.index)
        if held is not None:
            if held[2] != anchor.hash:
                mismatches.append(
                    f"lease {lease}: the signed {anchor.label} names link {anchor.index} "
                    f"with another hash than the archive's"
                )
            else:
                notes.append(f"lease {lease}: the signed {anchor.label} names link {anchor.index}")
    return mismatches, notes


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="gpulease-verify-archive",
        description="Check a gpulease month archive (tar) against its manifest and its "
        "signed chain checkpoints, with no database. Exit status 0 only when all agree.",
    )
    command.add_argument("archive", help="the gpulease-archive-YYYY-MM.tar file")
    command.add_argument("--public-key", metavar="FILE", help="the provider's published key")
    command.add_argument("--fingerprint", metavar="HEX", help="the key's sha256 fingerprint")
    command.add_argument(
        "--trust-embedded-key",
        action="store_true",
        help="check signatures with the key inside each checkpoint, whoever it is (warns)",
    )
    return command


def run(argv: Sequence[str] | None = None, out: Any = None) -> int:
    out = out or sys.stdout
    options = parser().parse_args(argv)
    try:
        key = Path(options.public_key).read_text() if options.public_key else None
        trust = Trust.of(
            key, fingerprint=options.fingerprint, trust_embedded_key=options.trust_embedded_key
        )
    except (OSError, ValueError, NoTrustedKey) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not Path(options.archive).is_file():
        print(f"error: cannot read {options.archive}", file=sys.stderr)
        return 2
    mismatches, notes = check(options.archive, trust)
    return report(mismatches, notes, agreed=AGREED, out=out)


def main() -> None:
    sys.exit(run())


__all__ = ["FORMAT", "ArchiveError", "check", "main", "read_manifest", "run"]

"""How the verifier's commands print what they found: each note as ``ok:`` (a warning as
itself, on standard error too), each mismatch as ``MISMATCH:``, then the verdict. The
exit status: 0 when all agree, 1 on a mismatch."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO


def report(mismatches: Sequence[str], notes: Sequence[str], *, agreed: str, out: IO[str]) -> int:
    for note in notes:
        warning = note.startswith("WARNING")
        print(note if warning else f"ok: {note}", file=out)
        if warning:
            print(note, file=sys.stderr)
    for mismatch in mismatches:
        print(f"MISMATCH: {mismatch}", file=out)
    if mismatches:
        print(f"{len(mismatches)} mismatch(es)", file=sys.stderr)
        return 1
    print(agreed, file=out)
    return 0

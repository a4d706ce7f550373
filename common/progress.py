"""Progress of long jobs on a terminal, and silence everywhere else.

tqdm draws its bar on stderr only when stderr is a terminal (``disable=None``), so logs,
pipes, Celery workers and CI see nothing; ``CI=true`` silences it even on a terminal."""

import os
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def _bar(*, quiet: bool = False, **options: Any) -> Any:
    silent = quiet or os.environ.get("CI", "").lower() in ("1", "true", "yes")
    return tqdm(disable=True if silent else None, leave=False, dynamic_ncols=True, **options)


def progress(
    iterable: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it"
) -> Any:
    """``iterable``, with a bar on a terminal: ``for t in progress(tenants, desc="draft")``."""
    return _bar(iterable=iterable, desc=desc, total=total, unit=unit)


def counter(*, desc: str, unit: str, total: int | None = None, quiet: bool = False) -> Any:
    """A bar advanced by hand (``bar.update(n)``) for work that arrives in batches; use it
    as a context manager. ``quiet``: none even on a terminal (the same work done inside a
    request)."""
    return _bar(desc=desc, total=total, unit=unit, unit_scale=True, quiet=quiet)

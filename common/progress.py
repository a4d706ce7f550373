"""Progress of long jobs on a terminal, and silence everywhere else.

tqdm draws its bar on stderr only when stderr is a terminal (``disable=None``), so logs,
pipes, Celery workers and CI see nothing; ``CI=true`` silences it even on a terminal."""

import os
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def _silent() -> bool | None:
    return True if os.environ.get("CI", "").lower() in ("1", "true", "yes") else None


def progress(
    iterable: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it"
) -> Any:
    """``iterable``, with a bar on a terminal: ``for tenant in progress(tenants, desc="bill")``."""
    return tqdm(
        iterable,
        desc=desc,
        total=total,
        unit=unit,
        disable=_silent(),
        leave=False,
        dynamic_ncols=True,
    )


def counter(*, desc: str, unit: str, total: int | None = None) -> Any:
    """A bar advanced by hand (``bar.update(n)``) for work that arrives in batches; use it
    as a context manager."""
    return tqdm(
        desc=desc,
        total=total,
        unit=unit,
        unit_scale=True,
        disable=_silent(),
        leave=False,
        dynamic_ncols=True,
    )

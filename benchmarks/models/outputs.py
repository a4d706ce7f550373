"""What the tools printed, stored once per distinct content (issue 16).

A run row holds the SHA-256 of its output and of its standard error, never the text: the
text is one ``RawOutput`` row, addressed by that hash and zstd-compressed, shared by every
run that printed the same bytes (a healthy node's link check prints the same thing every
five minutes). Slim run rows keep the hot table and its indexes small; the hash chain
covers the hashes, so an edited text no longer matches the run that names it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import zstandard
from django.db import models
from django.utils.translation import gettext_lazy as _

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# Level 3 is zstd's default: a few microseconds for a link check's output.
_LEVEL = 3


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class RawOutput(models.Model):
    sha256 = models.CharField(_("SHA-256"), max_length=64, primary_key=True)
    data = models.BinaryField(_("zstd-compressed text"))
    size = models.PositiveIntegerField(_("size (bytes)"))

    class Meta:
        verbose_name = _("raw output")
        verbose_name_plural = _("raw outputs")

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"

    @property
    def text(self) -> str:
        return zstandard.ZstdDecompressor().decompress(bytes(self.data)).decode()


def store(texts: Iterable[str]) -> int:
    """Each distinct non-empty text once (those already stored are left as they are).
    Returns how many distinct texts were given."""
    distinct = {digest(text): text for text in texts if text}
    if not distinct:
        return 0
    compressor = zstandard.ZstdCompressor(level=_LEVEL)
    RawOutput.objects.bulk_create(
        [
            RawOutput(sha256=key, data=compressor.compress(text.encode()), size=len(text.encode()))
            for key, text in distinct.items()
        ],
        ignore_conflicts=True,
        batch_size=500,
    )
    return len(distinct)


def texts(digests: Iterable[str]) -> dict[str, str]:
    """SHA-256 -> text of those stored, in one query."""
    wanted = {key for key in digests if key and key != EMPTY_SHA256}
    if not wanted:
        return {}
    return {row.sha256: row.text for row in RawOutput.objects.filter(sha256__in=wanted)}


class StoredTexts:
    """A run's ``raw_output`` and ``stderr``: set as text (the hash follows), read from the
    store on first use; ``load_texts`` fills many runs in one query."""

    TEXTS = {"raw_output": "raw_sha256", "stderr": "stderr_sha256"}

    def _texts(self) -> dict[str, str]:
        return self.__dict__.setdefault("_texts_cache", {})

    def _read(self, name: str) -> str:
        cache = self._texts()
        if name not in cache:
            key = getattr(self, self.TEXTS[name])
            cache[name] = texts([key]).get(key, "") if key else ""
        return cache[name]

    def _write(self, name: str, text: str | None, *, hash_empty: bool) -> None:
        text = text or ""
        self._texts()[name] = text
        self.__dict__.setdefault("_texts_unsaved", set()).add(name)
        setattr(self, self.TEXTS[name], digest(text) if text or hash_empty else "")

    def unsaved_texts(self) -> list[str]:
        return [self._texts()[name] for name in self.__dict__.get("_texts_unsaved", ())]

    def save(self, *args: Any, **kwargs: Any) -> None:
        store(self.unsaved_texts())
        self.__dict__.pop("_texts_unsaved", None)
        super().save(*args, **kwargs)  # type: ignore[misc]


def load_texts(runs: Iterable[Any]) -> None:
    """Fill the texts of ``runs`` in one query (a bundle with raw outputs, the probe tax)."""
    runs = list(runs)
    found = texts(getattr(run, field) for run in runs for field in StoredTexts.TEXTS.values())
    for run in runs:
        cache = run._texts()
        for name, field in StoredTexts.TEXTS.items():
            if name not in cache:
                key = getattr(run, field)
                cache[name] = found.get(key, "")


def store_unsaved(runs: Iterable[Any]) -> None:
    """Before a bulk_create of runs (which calls no save()): store their texts."""
    runs = list(runs)
    store(text for run in runs for text in run.unsaved_texts())
    for run in runs:
        run.__dict__.pop("_texts_unsaved", None)

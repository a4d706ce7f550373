"""Long jobs show progress on a terminal and stay silent in logs, pipes and CI: ingest
catch-up (which `bill`, `rerate` and the demo call) through the real ingest."""

import fcntl
import os
import struct
import sys
import termios

import pytest

from billing.ingest import ingest_all
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import active

pytestmark = pytest.mark.django_db


def runs_to_ingest() -> None:
    lease = active(
        make_lease(
            tenant=MembershipFactory().tenant, reference="ZY-2026-901", nodes=[NodeFactory()]
        )
    )
    for hour in range(3):
        make_run(lease, slot=at(f"2026-11-10 0{hour}:00"))


def stderr_of(monkeypatch, job, *, terminal: bool) -> str:  # type: ignore[no-untyped-def]
    """What ``job()`` wrote on stderr, stderr being a pseudo-terminal or a pipe."""
    reader, writer = os.openpty() if terminal else os.pipe()
    if terminal:  # a real terminal has a size; the bar fits its width
        fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    stream = os.fdopen(writer, "w")
    monkeypatch.setattr(sys, "stderr", stream)
    os.set_blocking(reader, False)
    try:
        job()
        stream.flush()
        try:  # read before the writing end closes: a closed terminal reads as an error
            return os.read(reader, 65536).decode(errors="replace")
        except BlockingIOError:
            return ""
    finally:
        monkeypatch.undo()
        stream.close()
        os.close(reader)


def stderr_of_ingest(monkeypatch, *, terminal: bool) -> str:  # type: ignore[no-untyped-def]
    def job() -> None:
        assert ingest_all(notify=False).runs == 3

    return stderr_of(monkeypatch, job, terminal=terminal)


def test_a_terminal_sees_the_ingest_progress(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    runs_to_ingest()
    shown = stderr_of_ingest(monkeypatch, terminal=True)
    # The bar ("ingest: 0.00runs [00:00, ?runs/s]") is drawn, then wiped when done.
    assert "\ringest: " in shown and "runs/s]" in shown, repr(shown)


def test_a_pipe_and_ci_see_nothing(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    runs_to_ingest()
    assert stderr_of_ingest(monkeypatch, terminal=False) == ""


def test_ci_silences_even_a_terminal(monkeypatch):
    monkeypatch.setenv("CI", "true")
    runs_to_ingest()
    assert stderr_of_ingest(monkeypatch, terminal=True) == ""

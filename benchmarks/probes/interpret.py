"""From a run's raw output to its parsed result, headline figure and verdict: the rules
live in ``gpulease_verify.interpret`` (Django-free), so an auditor re-parses a run's raw
output with the very code that parsed it here."""

from gpulease_verify.interpret import Interpretation, interpret

__all__ = ["Interpretation", "interpret"]

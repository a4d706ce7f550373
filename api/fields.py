"""Serializer fields the API's request bodies share."""

from datetime import datetime

from rest_framework import serializers

from common.instants import WRITE_YEARS, instant_problem


class InstantField(serializers.DateTimeField):
    """An ISO 8601 instant with its UTC offset, within ±14:00, in the years 2000 to 2999
    (common.instants): a 400 naming the field instead of a naive time read in the server's
    zone, or an overflow deeper down. Every instant the API takes is one of these
    (tests/api/test_instants.py walks the schema to hold it so)."""

    def enforce_timezone(self, value: datetime) -> datetime:
        # Checked here, where the parsed value still carries the offset that was sent.
        problem = instant_problem(value, WRITE_YEARS)
        if problem:
            raise serializers.ValidationError(problem, code="invalid")
        return super().enforce_timezone(value)

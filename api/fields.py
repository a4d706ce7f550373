"""Serializer fields the API's request bodies share."""

from datetime import datetime

from rest_framework import serializers

from common.instants import WRITE_YEARS, instant_problem


class InstantField(serializers.DateTimeField):
    """An ISO 8601 instant with a UTC offset within ±14:00, in the years 2000 to 2999
    (common.instants): a 400 naming the field instead of an overflow deeper down."""

    def enforce_timezone(self, value: datetime) -> datetime:
        # Checked here, where the parsed value still carries the offset that was sent.
        problem = instant_problem(value, WRITE_YEARS)
        if problem:
            raise serializers.ValidationError(problem, code="invalid")
        return super().enforce_timezone(value)

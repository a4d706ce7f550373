"""Alertmanager's webhook body, payload version 4
(https://prometheus.io/docs/alerting/latest/configuration/#webhook_config). Fields that
later Alertmanager versions add beside these are ignored, so an upgrade does not stop the
intake; the ones read here are checked strictly."""

from typing import Any

from rest_framework import serializers

from api.fields import InstantField

MAX_ALERTS = 1000  # Alertmanager's max_alerts (0 = all) should stay below this
UNSET_INSTANT = "0001-01-01T00:00:00Z"  # Go's zero time: Alertmanager's "no end yet"


class StringMap(serializers.DictField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(max_length=4096, allow_blank=True), **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        value = super().to_internal_value(data)
        if len(value) > 100:
            raise serializers.ValidationError("At most 100 labels or annotations.")
        for key in value:
            if not key or len(key) > 255:
                raise serializers.ValidationError("Label names are 1 to 255 characters.")
        return value


class OptionalInstantField(InstantField):
    """An instant, or Go's zero time (0001-01-01T00:00:00Z) for "not known": None."""

    def to_internal_value(self, value: Any) -> Any:
        if value == UNSET_INSTANT:  # exactly as Go marshals it; any other year 1 is refused
            return None
        return super().to_internal_value(value)


class AlertSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["firing", "resolved"])
    labels = StringMap()
    annotations = StringMap(required=False, default=dict)
    startsAt = InstantField()
    endsAt = OptionalInstantField(required=False, allow_null=True, default=None)
    generatorURL = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default=""
    )
    fingerprint = serializers.RegexField(r"^[0-9a-f]{1,64}$")

    def validate_labels(self, value: dict[str, str]) -> dict[str, str]:
        if not value.get("alertname"):
            raise serializers.ValidationError("An alert needs its alertname label.")
        return value


class WebhookSerializer(serializers.Serializer):
    version = serializers.ChoiceField(choices=["4"])
    status = serializers.ChoiceField(choices=["firing", "resolved"])
    receiver = serializers.CharField(max_length=255, required=False, allow_blank=True)
    groupKey = serializers.CharField(max_length=4096, required=False, allow_blank=True)
    alerts = AlertSerializer(many=True, max_length=MAX_ALERTS, allow_empty=True)

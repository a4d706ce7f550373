"""The base every API view set inherits: rows come from ``visible_to(request.user)`` in
one place, so no view can forget the tenant scope (after NetBox's BaseViewSet).

A view set names its model through ``queryset`` as usual; ``get_queryset`` replaces it
with the rows the user may see, then lets the view add joins and ordering in
``optimize``. A model without ``objects.visible_to`` must name a selector in
``visible`` (a function of the user), or the view refuses to run.

Audit and other views add ``required_scope = "audit"`` and ``read_roles`` to narrow who
may use them (api.permissions)."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from rest_framework import serializers, viewsets

from api.permissions import ALL_ROLES


class BaseViewSet(viewsets.GenericViewSet):
    visible: Callable[[Any], QuerySet] | None = None
    # Who may use the view (api.permissions); actions may override these in @action(...).
    read_roles: frozenset[str] = ALL_ROLES
    write_roles: frozenset[str] = frozenset()  # provider staff only
    required_scope: str | None = None  # None: read for safe methods, write otherwise

    def get_queryset(self) -> QuerySet:
        model = self.queryset.model  # type: ignore[union-attr]
        user = self.request.user
        if self.visible is not None:
            rows = type(self).visible(user)  # type: ignore[misc]
        elif hasattr(model.objects, "visible_to") or hasattr(model._default_manager, "visible_to"):
            rows = model._default_manager.visible_to(user)
        else:
            raise ImproperlyConfigured(
                f"{type(self).__name__}: {model.__name__} has no visible_to(); name a selector "
                "in `visible`."
            )
        return self.optimize(rows)

    def optimize(self, queryset: QuerySet) -> QuerySet:
        """Joins, prefetches and ordering for this view; never widens the rows."""
        return queryset


class StrictFieldsMixin:
    """Refuse keys a serializer does not know, instead of silently dropping them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {
                name
                for name, field in self.fields.items()  # type: ignore[attr-defined]
                if not field.read_only
            }
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError({name: [_("Unknown field.")] for name in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    pass


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    pass

"""The base every API view set inherits: rows come from ``visible_to(request.user)`` in
one place, so no view can forget the tenant scope (after NetBox's BaseViewSet).

A view set names its model through ``queryset`` as usual; ``get_queryset`` replaces it
with the rows the user may see, then lets the view add joins and ordering in
``optimize``. A model without ``objects.visible_to`` must name a selector in
``visible`` (a function of the user), or the view refuses to run.

Audit and other views add ``required_scope = "audit"`` and ``read_roles`` to narrow who
may use them (api.permissions).

Input is strict before any view code runs: a query parameter the view does not know is a
400 (a misspelt filter would otherwise be ignored and answer every row), and so is a write
whose body is not a JSON object."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.settings import api_settings

from api.permissions import ALL_ROLES

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
_PAGINATION_PARAMETERS = (
    "page_query_param",
    "page_size_query_param",
    "cursor_query_param",
    "limit_query_param",
    "offset_query_param",
)


class KnownQueryParametersMixin:
    """Refuse query parameters the view does not know: its filters (a range filter as
    ``<name>_after`` and ``<name>_before``), its paginator's, ``format``, and those it
    names in ``query_parameters`` (per view, or per action through ``@action(...)``)."""

    query_parameters: frozenset[str] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        unknown = sorted(set(request.query_params) - self.known_query_parameters())
        if unknown:
            raise serializers.ValidationError(
                {name: [_("Unknown query parameter.")] for name in unknown}
            )

    def known_query_parameters(self) -> set[str]:
        known = {*self.query_parameters, api_settings.URL_FORMAT_OVERRIDE}
        paginator = getattr(self, "paginator", None)
        known |= {getattr(paginator, name, None) for name in _PAGINATION_PARAMETERS}
        for backend in getattr(self, "filter_backends", ()):
            if hasattr(backend, "get_filterset_class"):
                filterset = backend().get_filterset_class(self, self.get_queryset())  # type: ignore[attr-defined]
                known |= filter_parameters(filterset) if filterset else set()
        return {name for name in known if name}


def filter_parameters(filterset: Any) -> set[str]:
    """The query parameters a django-filter FilterSet reads."""
    names = set()
    for name, item in filterset.base_filters.items():
        suffixes = getattr(item.field_class.widget, "suffixes", None)
        names |= {f"{name}_{suffix}" for suffix in suffixes} if suffixes else {name}
    return names


class BaseViewSet(KnownQueryParametersMixin, viewsets.GenericViewSet):
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

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method in WRITE_METHODS and not isinstance(request.data, dict):
            raise serializers.ValidationError(_("The body must be a JSON object."))

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


class NoBodySerializer(StrictSerializer):
    """The body of an action that takes none: empty, or ``{}``."""


def refuse_body(request: Request) -> None:
    """A 400 naming each key of a body sent to an action that takes none."""
    NoBodySerializer(data=request.data).is_valid(raise_exception=True)

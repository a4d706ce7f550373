import re
from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination

_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}", re.ASCII)


class StrictPageSizeMixin:
    """``page_size`` is a whole number from 1 on (a larger one than max_page_size is cut to
    it, as DRF does); anything else is a 400 instead of DRF's silent default."""

    page_size_query_param = "page_size"

    def get_page_size(self, request: Any) -> int:
        text = request.query_params.get(self.page_size_query_param)
        if text is None:
            return self.page_size  # type: ignore[attr-defined,no-any-return]
        if not _WHOLE_NUMBER.fullmatch(text) or int(text) < 1:
            raise ValidationError(
                {self.page_size_query_param: [_("Give a whole number of rows, 1 or more.")]}
            )
        return min(int(text), self.max_page_size)  # type: ignore[attr-defined]


class PagePagination(StrictPageSizeMixin, PageNumberPagination):
    page_size = 50
    max_page_size = 500


class SlotCursorPagination(StrictPageSizeMixin, CursorPagination):
    """Probe runs, newest slot first; a deep page costs the same as the first (keyset)."""

    ordering = ("-slot_at", "-id")
    page_size = 100
    max_page_size = 1000

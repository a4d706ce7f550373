from rest_framework.pagination import CursorPagination, PageNumberPagination


class PagePagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class SlotCursorPagination(CursorPagination):
    """Probe runs, newest slot first; a deep page costs the same as the first (keyset)."""

    ordering = ("-slot_at", "-id")
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

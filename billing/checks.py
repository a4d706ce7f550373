"""System checks of billing's settings (``manage.py check``, and every runserver, migrate
and deploy start)."""

from typing import Any

from django.conf import settings
from django.core import checks

from leases.uscc import check_uscc


@checks.register(checks.Tags.compatibility)
def seller_uscc(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The seller's tax ID goes onto every invoice and every 数电票 payload: it must be a
    统一社会信用代码 whose check character matches."""
    try:
        check_uscc(str(settings.INVOICE_SELLER.get("tax_id", "")))
    except ValueError as exc:
        return [
            checks.Error(
                f"INVOICE_SELLER_TAX_ID: {exc}",
                hint="Set INVOICE_SELLER_TAX_ID to the provider's 统一社会信用代码.",
                id="billing.E001",
            )
        ]
    return []

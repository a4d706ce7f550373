import re
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.egress import validate_webhook_url
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify import webhooks
from gpulease_verify.money import CURRENCY
from leases.choices import InvoiceType
from leases.uscc import validate_uscc

DEFAULT_TIME_ZONE = "Asia/Shanghai"
# Who may read a tenant's webhook signing secret in the admin and the API; anybody else
# sees MASKED_SECRET.
WEBHOOK_SECRET_PERMISSION = "leases.view_webhook_secret"
MASKED_SECRET = "whsec_********"


def validate_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError(
            _("%(zone)s is not a time zone name; use one such as Asia/Shanghai."),
            params={"zone": value},
        )


# A phone number as people write it: an optional +, digits, spaces, hyphens and brackets,
# and an extension after 转 or ext.
_PHONE = re.compile(r"\+?[0-9() -]+(?:\s*(?:转|ext\.?)\s*[0-9]{1,6})?", re.IGNORECASE)
PHONE_MIN_DIGITS = 5


def validate_phone(value: str) -> None:
    if not value:
        return
    if not _PHONE.fullmatch(value) or sum(c.isdigit() for c in value) < PHONE_MIN_DIGITS:
        raise ValidationError(
            _(
                "A phone number is digits, spaces, + - ( ) and at least 5 digits, with an "
                "extension after 转 or ext if it has one, such as +86 755 8888 0000."
            ),
            code="phone",
        )


def new_webhook_secret() -> str:
    return webhooks.new_secret()


def validate_webhook_secret(value: str) -> None:
    try:
        webhooks.secret_key(value)
    except ValueError:
        raise ValidationError(
            _("A webhook secret is whsec_ followed by base64, as Standard Webhooks defines it.")
        ) from None


class Tenant(TimeStampedModel):
    """A customer organisation that leases clusters."""

    name = models.CharField(_("name"), max_length=200)
    slug = models.SlugField(_("slug"), unique=True)
    contact_name = models.CharField(_("contact name"), max_length=200, blank=True)
    contact_email = models.EmailField(_("contact email"), blank=True)
    contact_phone = models.CharField(
        _("contact phone"), max_length=50, blank=True, validators=[validate_phone]
    )
    time_zone = models.CharField(
        _("time zone"),
        max_length=64,
        default=DEFAULT_TIME_ZONE,
        validators=[validate_time_zone],
        help_text=_("Billing periods are cut and times shown in this zone."),
    )
    currency = models.CharField(
        _("currency"), max_length=3, choices=[(CURRENCY, "CNY (¥)")], default=CURRENCY
    )
    # The buyer on invoices (购买方): frozen onto each invoice when it is issued.
    legal_name = models.CharField(
        _("legal name"), max_length=200, blank=True, help_text=_("Empty: the name above.")
    )
    tax_id = models.CharField(
        _("tax ID (统一社会信用代码)"),
        max_length=32,
        blank=True,
        validators=[validate_uscc],
        help_text=_("18 characters with a GB 32100-2015 check character."),
    )
    invoice_type = models.CharField(
        _("invoice type"),
        max_length=8,
        choices=InvoiceType.choices,
        default=InvoiceType.ORDINARY,
        help_text=_(
            "What its 数电票 are issued as; a special VAT invoice (专票) needs the "
            "registered address, phone, bank and account below."
        ),
    )
    invoice_address = models.CharField(_("registered address"), max_length=300, blank=True)
    invoice_phone = models.CharField(_("invoice phone"), max_length=50, blank=True)
    bank_name = models.CharField(_("bank"), max_length=200, blank=True)
    bank_account = models.CharField(_("bank account"), max_length=64, blank=True)
    webhook_url = models.URLField(
        _("incident webhook URL"),
        blank=True,
        validators=[validate_webhook_url],
        help_text=_("Incidents opening and closing are POSTed here, signed with the secret."),
    )
    webhook_secret = models.CharField(
        _("webhook signing secret"),
        max_length=100,
        default=new_webhook_secret,
        validators=[validate_webhook_secret],
        help_text=_(
            "Standard Webhooks secret (whsec_...): the key of the webhook-signature header. "
            "Give it to the tenant; a receiver verifies with it."
        ),
    )

    # The secret a rotation replaced, still signing beside the new one until the instant
    # below (settings.WEBHOOK_SECRET_OVERLAP_HOURS): never shown, not even masked.
    previous_webhook_secret = models.CharField(
        _("previous webhook signing secret"), max_length=100, blank=True, editable=False
    )
    previous_webhook_secret_until = models.DateTimeField(
        _("previous secret signs until"), null=True, blank=True, editable=False
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = ""

    class Meta:
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")
        ordering = ["name"]
        permissions = [
            ("view_webhook_secret", _("Can see tenants' webhook signing secrets")),
        ]

    def __str__(self) -> str:
        return self.name

    def webhook_secret_for(self, user: Any) -> str:
        """The signing secret to show ``user``: in clear to a holder of
        WEBHOOK_SECRET_PERMISSION, masked to anybody else (a superuser holds it)."""
        if user is not None and user.has_perm(WEBHOOK_SECRET_PERMISSION):
            return self.webhook_secret
        return MASKED_SECRET

    def replace_webhook_secret(self, secret: str, *, at: datetime) -> list[str]:
        """Put ``secret`` in force at ``at``, the one it replaces signing beside it for the
        overlap (a rotation inside an overlap drops the oldest); the fields set, unsaved."""
        if secret == self.webhook_secret:
            return []
        self.previous_webhook_secret = self.webhook_secret
        self.previous_webhook_secret_until = at + timedelta(
            hours=settings.WEBHOOK_SECRET_OVERLAP_HOURS
        )
        self.webhook_secret = secret
        return ["webhook_secret", "previous_webhook_secret", "previous_webhook_secret_until"]

    def signing_secrets(self, at: datetime) -> list[str]:
        """The secrets a delivery at ``at`` is signed with: the one in force, then the
        replaced one while its overlap lasts."""
        until = self.previous_webhook_secret_until
        if self.previous_webhook_secret and until is not None and at < until:
            return [self.webhook_secret, self.previous_webhook_secret]
        return [self.webhook_secret]

    def buyer_identity(self) -> dict[str, str]:
        """The buyer block an invoice freezes when it is issued."""
        return {
            "legal_name": self.legal_name or self.name,
            "tax_id": self.tax_id,
            "address": self.invoice_address,
            "phone": self.invoice_phone,
            "bank": self.bank_name,
            "account": self.bank_account,
        }

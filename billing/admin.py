from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from billing import services
from billing.models import (
    CreditNote,
    CreditNoteLine,
    HourlyRollup,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    RunningFigure,
    TrafficSample,
    Voucher,
    VoucherRedemption,
)
from billing.rerate_admin import rerate_from_corrected_terms
from common.admin import ReadOnlyAdmin, StampedAdmin, requires
from gpulease_verify.units import format_bps
from leases import admin as leases_admin
from leases.models import LeaseTerms, TermsAmendment

LINE_FIELDS = (
    "position",
    "lease",
    "kind",
    "description",
    "quantity",
    "unit",
    "unit_price",
    "amount",
    "detail",
)

INVOICE_FIELDS = (
    "number",
    "tenant",
    "period",
    "period_start",
    "period_end",
    "status",
    "issued_at",
    "issue_date",
    "due_date",
    "seller",
    "buyer",
    "forced_reason",
    "forced_over",
    "paid_at",
    "voided_at",
    "void_reason",
    "currency",
    "subtotal",
    "tax_rate_percent",
    "tax",
    "total",
    "network_cost_share",
)

CREDIT_NOTE_FIELDS = (
    "number",
    "tenant",
    "invoice",
    "reason",
    "kind",
    "full_reversal",
    "issued_at",
    "issue_date",
    "currency",
    "subtotal",
    "tax",
    "total",
    "seller",
    "buyer",
)
EVENT_FIELDS = ("at", "kind", "from_state", "to_state", "actor", "reason", "credit_note")
CREDIT_NOTE_LINE_FIELDS = (
    "position",
    "original_line",
    "lease",
    "kind",
    "description",
    "amount",
    "tax_rate_percent",
)


class InvoiceLineInline(admin.TabularInline):
    """Lines come from billing.invoicing; a draft is changed by recomputing it."""

    model = InvoiceLine
    extra = 0
    can_delete = False
    fields = LINE_FIELDS
    readonly_fields = LINE_FIELDS
    ordering = ["position"]

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


def _each(modeladmin, request, queryset, service, done_message) -> None:  # type: ignore[no-untyped-def]
    done = 0
    for invoice in queryset.select_related("tenant"):
        try:
            service(invoice)
            done += 1
        except ValidationError as error:
            modeladmin.message_user(request, " ".join(error.messages), messages.ERROR)
    if done:
        modeladmin.message_user(request, done_message(done), messages.SUCCESS)


class InvoiceEventInline(admin.TabularInline):
    """Who issued, paid, voided or credited the invoice, when and why (billing.services
    writes them; never edited)."""

    model = InvoiceEvent
    fk_name = "invoice"
    extra = 0
    can_delete = False
    fields = EVENT_FIELDS
    readonly_fields = EVENT_FIELDS
    ordering = ["at", "id"]

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        return super().get_queryset(request).select_related("actor", "credit_note")

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.action(description=_("Issue selected drafts"), permissions=["issue_invoice"])
def issue(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    def issue_one(invoice):  # type: ignore[no-untyped-def]
        issued = services.issue_invoice(invoice=invoice, actor=request.user)
        # Issued all the same; the metering gaps of its period are for the operator to read.
        for warning in services.issue_warnings(issued):
            modeladmin.message_user(request, warning, messages.WARNING)

    _each(
        modeladmin,
        request,
        queryset,
        issue_one,
        lambda n: ngettext("%(n)d invoice issued.", "%(n)d invoices issued.", n) % {"n": n},
    )


class ReasonForm(forms.Form):
    reason = forms.CharField(label=_("reason"), widget=forms.Textarea, max_length=2000)


@admin.action(
    description=_("Void selected invoices (asks for a reason)"), permissions=["void_invoice"]
)
def void(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    form = ReasonForm(request.POST if "reason" in request.POST else None)
    if form.is_valid():
        reason = form.cleaned_data["reason"]
        _each(
            modeladmin,
            request,
            queryset,
            lambda invoice: services.void_invoice(
                invoice=invoice, reason=reason, actor=request.user
            ),
            lambda n: ngettext("%(n)d invoice voided.", "%(n)d invoices voided.", n) % {"n": n},
        )
        return None
    return TemplateResponse(
        request,
        "admin/billing/void_invoices.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": _("Void invoices"),
            "invoices": queryset,
            "form": form,
            "opts": modeladmin.model._meta,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        },
    )


class PaidOnForm(forms.Form):
    paid_on = forms.DateField(
        label=_("paid on"),
        required=False,
        help_text=_("YYYY-MM-DD in the tenant's time zone; empty for today."),
    )


@admin.action(description=_("Mark as paid (asks for the day)"), permissions=["mark_invoice_paid"])
def mark_paid(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    form = PaidOnForm(request.POST if "confirm" in request.POST else None)
    if form.is_valid():
        paid_on = form.cleaned_data["paid_on"]
        _each(
            modeladmin,
            request,
            queryset,
            lambda invoice: services.mark_paid(
                invoice=invoice, paid_on=paid_on, actor=request.user
            ),
            lambda n: (
                ngettext("%(n)d invoice marked paid.", "%(n)d invoices marked paid.", n) % {"n": n}
            ),
        )
        return None
    return TemplateResponse(
        request,
        "admin/billing/mark_paid.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": _("Mark invoices as paid"),
            "invoices": queryset,
            "form": form,
            "opts": modeladmin.model._meta,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        },
    )


@admin.action(description=_("Recompute drafts"), permissions=["recompute_invoice"])
def recompute(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    _each(
        modeladmin,
        request,
        queryset,
        lambda invoice: services.draft_invoice(tenant=invoice.tenant, period=invoice.period),
        lambda n: ngettext("%(n)d draft recomputed.", "%(n)d drafts recomputed.", n) % {"n": n},
    )


@admin.register(Invoice)
class InvoiceAdmin(StampedAdmin):
    """Invoices are made by the bill command or the actions here, never typed in."""

    list_display = [
        "tenant",
        "period",
        "number",
        "status",
        "issue_date",
        "due_date",
        "subtotal",
        "tax",
        "total",
        "network_share",
        "forced",
    ]
    list_filter = ["status", "period", "tenant"]
    search_fields = [
        "number",
        "tenant__name",
        "tenant__slug",
        "period",
        "lines__lease__reference",
    ]
    list_select_related = ["tenant"]
    ordering = ["-period", "tenant__name"]
    fields = INVOICE_FIELDS
    readonly_fields = INVOICE_FIELDS
    actions = [issue, mark_paid, void, recompute]
    inlines = [InvoiceLineInline, InvoiceEventInline]

    has_issue_invoice_permission = requires("billing.issue_invoice")
    has_void_invoice_permission = requires("billing.void_invoice")
    has_mark_invoice_paid_permission = requires("billing.mark_invoice_paid")
    has_recompute_invoice_permission = requires("billing.recompute_invoice")

    def get_search_results(self, request, queryset, search_term):  # type: ignore[no-untyped-def]
        queryset, _may_have_duplicates = super().get_search_results(request, queryset, search_term)
        return queryset.distinct(), False

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    @admin.display(description=_("issued by force"), boolean=True)
    def forced(self, invoice: Invoice) -> bool:
        return bool(invoice.forced_reason)

    @admin.display(description=_("network cost share"), ordering="network_cost_share")
    def network_share(self, invoice: Invoice) -> str:
        if invoice.network_cost_share is None:
            return "-"
        return f"{invoice.network_cost_share * 100:.2f}%"


class CreditNoteLineInline(admin.TabularInline):
    model = CreditNoteLine
    extra = 0
    can_delete = False
    fields = CREDIT_NOTE_LINE_FIELDS
    readonly_fields = CREDIT_NOTE_LINE_FIELDS
    ordering = ["position"]

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(CreditNote)
class CreditNoteAdmin(ReadOnlyAdmin):
    """Credit notes are made through billing.services (API or shell), never typed in."""

    list_display = ["number", "tenant", "invoice", "issue_date", "subtotal", "tax", "total"]
    list_filter = ["tenant"]
    search_fields = ["number", "invoice__number", "tenant__name", "reason"]
    list_select_related = ["tenant", "invoice"]
    fields = CREDIT_NOTE_FIELDS
    readonly_fields = CREDIT_NOTE_FIELDS
    inlines = [CreditNoteLineInline]


class VoucherRedemptionInline(admin.TabularInline):
    model = VoucherRedemption
    extra = 0
    fields = readonly_fields = ("invoice", "amount", "at")

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Voucher)
class VoucherAdmin(ReadOnlyAdmin):
    """Vouchers (代金券) are issued and used by issuing invoices (billing.vouchers)."""

    list_display = ["number", "tenant", "lease", "amount", "issued_at", "expires_at", "voided_at"]
    list_filter = ["tenant"]
    search_fields = ["number", "source_invoice__number", "tenant__name", "lease__reference"]
    list_select_related = ["tenant", "lease"]
    fields = readonly_fields = (
        "number",
        "tenant",
        "lease",
        "source_invoice",
        "period",
        "currency",
        "amount",
        "issued_at",
        "validity_months",
        "expires_at",
        "voided_at",
        "description",
        "detail",
    )
    inlines = [VoucherRedemptionInline]


@admin.register(InvoiceLine)
class InvoiceLineAdmin(ReadOnlyAdmin):
    list_display = ["invoice", "position", "lease", "kind", "quantity", "unit", "amount"]
    list_filter = ["kind", "invoice__status", "invoice__period"]
    search_fields = ["invoice__tenant__name", "lease__reference", "description"]
    list_select_related = ["invoice__tenant", "lease"]
    readonly_fields = ["invoice", *LINE_FIELDS]


@admin.register(HourlyRollup)
class HourlyRollupAdmin(ReadOnlyAdmin):
    list_display = [
        "hour",
        "lease",
        "kind",
        "passed",
        "failed",
        "unknown",
        "excluded",
        "informational",
        "mean",
        "available_minutes",
        "unavailable_minutes",
        "unknown_minutes",
    ]
    list_filter = ["kind"]
    search_fields = ["lease__reference"]
    list_select_related = ["lease"]
    date_hierarchy = "hour"
    show_full_result_count = False  # a year of hours per lease and kind

    @admin.display(description=_("mean bandwidth"))
    def mean(self, rollup: HourlyRollup) -> str:
        if not rollup.measured:
            return "-"
        return format_bps(rollup.sum_bps / rollup.measured)


@admin.register(TrafficSample)
class TrafficSampleAdmin(ReadOnlyAdmin):
    list_display = ["slot_at", "lease", "seconds", "tx_bytes", "rate", "nodes", "resets", "wraps"]
    search_fields = ["lease__reference"]
    list_select_related = ["lease"]
    date_hierarchy = "slot_at"
    show_full_result_count = False

    @admin.display(description=_("rate"))
    def rate(self, sample: TrafficSample) -> str:
        if not sample.seconds:
            return "-"
        return format_bps(sample.tx_bytes * 8 / sample.seconds)


@admin.register(RunningFigure)
class RunningFigureAdmin(ReadOnlyAdmin):
    list_display = [
        "period",
        "lease",
        "billing_mode",
        "quantity",
        "unit",
        "amount",
        "projected_amount",
        "samples_through",
        "computed_at",
    ]
    list_filter = ["billing_mode", "period"]
    search_fields = ["lease__reference"]
    list_select_related = ["lease"]


# Re-rating extends the terms pages of the leases app (which cannot know about billing).
admin.site.unregister(LeaseTerms)
admin.site.unregister(TermsAmendment)


@admin.register(LeaseTerms)
class LeaseTermsAdmin(leases_admin.LeaseTermsAdmin):
    actions = [rerate_from_corrected_terms]
    has_rerate_lease_permission = requires("billing.rerate_lease")


@admin.register(TermsAmendment)
class TermsAmendmentAdmin(leases_admin.TermsAmendmentAdmin):
    actions = [rerate_from_corrected_terms]
    has_rerate_lease_permission = requires("billing.rerate_lease")

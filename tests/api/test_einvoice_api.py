"""The 数电票 payload downloads (issue 32 item 4): API and portal, tenant-scoped like the
other invoice documents; a draft is a 400 with the reason."""

import json
from decimal import Decimal as D

import pytest
import time_machine
from django.test import Client
from django.urls import reverse

from accounts.choices import Role
from billing.documents import einvoice
from tests.api.isolation_cases import credit_note_of, issued_invoice_of
from tests.factories import at

pytestmark = pytest.mark.django_db


@pytest.fixture
def issued(world):
    with time_machine.travel(at("2026-12-02 09:00"), tick=False):
        return issued_invoice_of(world.alpha), credit_note_of(world.alpha)


def test_api_downloads_are_tenant_scoped(world, client_for, issued):
    invoice, note = issued
    alpha = client_for(world.alpha.members[Role.VIEWER])
    body = alpha.get(reverse("api:invoice-einvoice", kwargs={"pk": invoice.pk})).json()
    einvoice.validate(body)
    assert (body["number"], body["buyer"]["uscc"]) == (invoice.number, "91110108551385082Q")
    assert body["remarks"].endswith("租约 ALPHA-1")
    red = alpha.get(reverse("api:creditnote-einvoice", kwargs={"pk": note.pk})).json()
    assert red["red_letter"] and red["original"]["number"] == invoice.number
    assert D(red["totals"]["total"]) == note.total == -invoice.total
    beta = client_for(world.beta.members[Role.ADMIN])
    for name, pk in (("invoice", invoice.pk), ("creditnote", note.pk)):
        assert beta.get(reverse(f"api:{name}-einvoice", kwargs={"pk": pk})).status_code == 404


def test_api_draft_is_400(world, client_for):
    answer = client_for(world.alpha.members[Role.ADMIN]).get(
        reverse("api:invoice-einvoice", kwargs={"pk": world.alpha.invoice.pk})
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "Only issued invoices have a 数电票 payload; alpha 2026-11 is draft."
    )


def test_portal_link_and_download(world, issued):
    invoice, note = issued
    client = Client()
    client.force_login(world.alpha.members[Role.VIEWER])
    page = client.get(reverse("portal:invoice", kwargs={"pk": invoice.pk})).content.decode()
    assert reverse("portal:invoice-einvoice", kwargs={"pk": invoice.pk}) in page
    assert reverse("portal:credit-note-einvoice", kwargs={"pk": note.pk}) in page
    download = client.get(reverse("portal:invoice-einvoice", kwargs={"pk": invoice.pk}))
    assert download["Content-Type"] == "application/json"
    assert f'filename="invoice-{invoice.number}-einvoice.json"' in download["Content-Disposition"]
    assert json.loads(download.content)["number"] == invoice.number
    other = Client()
    other.force_login(world.beta.members[Role.ADMIN])
    assert (
        other.get(reverse("portal:invoice-einvoice", kwargs={"pk": invoice.pk})).status_code == 404
    )

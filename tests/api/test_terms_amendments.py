"""Retroactive terms amendments through the API: provider staff propose, only a tenant
admin of the lease's tenant acknowledges, and then the version is in force and linked."""

import pytest
from django.test import Client
from django.urls import reverse

from accounts.choices import Role
from leases.models import TermsAmendment

pytestmark = pytest.mark.django_db

PROPOSAL = {
    "effective_from": "2026-11-10T00:00:00+08:00",
    "changes": {"credit_cap_percent": "40"},
    "reason": "Signed on the 10th, recorded late.",
}


def test_staff_propose_and_the_tenant_admin_acknowledges(world, client_for):
    alpha = world.alpha
    staff = client_for(world.staff)
    proposed = staff.post(
        reverse("api:termsamendment-list"), {**PROPOSAL, "lease": alpha.lease.pk}, format="json"
    )
    assert proposed.status_code == 201, proposed.content
    assert (proposed.json()["status"], proposed.json()["terms_version"]) == ("pending", None)
    url = reverse("api:termsamendment-acknowledge", kwargs={"pk": proposed.json()["id"]})

    refused = staff.post(url, {"reason": "We agreed."}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == (
        f"Only a tenant admin of {alpha.tenant.name} can acknowledge an amendment of its lease."
        " Provider staff never act as a tenant user."
    )
    viewer = client_for(alpha.members[Role.VIEWER])
    assert viewer.post(url, {"reason": "We agreed."}, format="json").status_code == 403
    beta_admin = client_for(world.beta.members[Role.ADMIN])
    assert beta_admin.post(url, {"reason": "We agreed."}, format="json").status_code == 404

    admin = client_for(alpha.members[Role.ADMIN])
    done = admin.post(url, {"reason": "We agreed by phone on the 10th."}, format="json")
    assert done.status_code == 200, done.content
    assert (done.json()["status"], done.json()["terms_version"]) == ("acknowledged", 2)
    amendment = TermsAmendment.objects.get(pk=proposed.json()["id"])
    assert amendment.terms.acknowledgement["by"] == alpha.members[Role.ADMIN].username
    assert amendment.terms.chain_index is not None
    again = admin.post(url, {"reason": "Again."}, format="json")
    assert again.status_code == 400


def test_an_amendment_not_in_the_past_is_not_proposed(world, client_for):
    staff = client_for(world.staff)
    body = {**PROPOSAL, "lease": world.alpha.lease.pk, "effective_from": "2099-01-01T00:00:00Z"}
    refused = staff.post(reverse("api:termsamendment-list"), body, format="json")
    assert refused.status_code == 400
    assert "not in the past" in refused.json()["error"]["message"]


def test_a_tenant_may_not_propose(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    body = {**PROPOSAL, "lease": world.alpha.lease.pk}
    assert admin.post(reverse("api:termsamendment-list"), body, format="json").status_code == 403


# --- what `changes` may hold (issue 30, item 5) -----------------------------------------


def propose(world, client_for, **fields):  # type: ignore[no-untyped-def]
    body = {**PROPOSAL, "lease": world.alpha.lease.pk, **fields}
    return client_for(world.staff).post(reverse("api:termsamendment-list"), body, format="json")


@pytest.mark.parametrize(
    ("changes", "sentences"),
    [
        # true would have become a 1 % cap
        ({"credit_cap_percent": True}, ["credit_cap_percent: A valid number is required."]),
        (
            {"incident_after_violations": "3.5"},
            ["incident_after_violations: A valid integer is required."],
        ),
        (
            {"probe_cadence_s": {"link": "often"}},
            ["probe_cadence_s.link: A valid integer is required."],
        ),
        (
            {"credit_tiers": [{"below_percent": "95", "credit_percent": "ten"}]},
            ["credit_tiers.0.credit_percent: Give a percentage such as 99.5."],
        ),
        ({"colour": "red"}, ["colour: Unknown field."]),
        # Terms fields that are not the contract's: the chain's and the version's own.
        (
            {"version": 7, "chain_index": 0},
            ["chain_index: Unknown field.", "version: Unknown field."],
        ),
        ({"effective_from": "0001-01-01"}, ["effective_from: Unknown field."]),
        ({}, ["Name at least one contract field to change."]),
    ],
)
def test_changes_are_held_to_the_rules_of_the_terms_themselves(
    world, client_for, changes, sentences
):
    response = propose(world, client_for, changes=changes)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["fields"] == {"changes": sentences}
    assert error["message"] == f"changes: {sentences[0]}"
    assert not TermsAmendment.objects.exists()


def test_changes_are_stored_as_the_terms_read_them(world, client_for):
    response = propose(
        world, client_for, changes={"credit_cap_percent": 40, "confirm_failures": "false"}
    )
    assert response.status_code == 201, response.content
    assert response.json()["changes"] == {"credit_cap_percent": "40.00", "confirm_failures": False}


@pytest.mark.parametrize(
    ("effective_from", "sentence"),
    [
        (
            "0001-01-01",
            "Give the instant with its UTC offset (2026-11-10T08:00:00+08:00, or Z for UTC): "
            "without one it is ambiguous.",
        ),
        ("0001-01-01T00:00:00Z", "Give an instant between 2000 and 2999."),
        ("0001-01-01T00:00:00+14:00", "Give an instant between 2000 and 2999."),
    ],
)
def test_an_effective_from_in_year_one_is_a_400_saying_why(
    world, client_for, effective_from, sentence
):
    response = propose(world, client_for, effective_from=effective_from)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"effective_from": [sentence]}


def test_the_admin_form_applies_the_same_rules(world):
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(world.staff)
    form = {
        "lease": world.alpha.lease.pk,
        "effective_from_0": "2026-11-10",
        "effective_from_1": "00:00:00",
        "reason": "Signed on the 10th.",
    }
    page = client.post(
        "/admin/leases/termsamendment/add/", {**form, "changes": '{"credit_cap_percent": true}'}
    )
    assert page.status_code == 200  # the form again, with the reason
    assert "credit_cap_percent: A valid number is required." in page.content.decode()
    page = client.post(
        "/admin/leases/termsamendment/add/", {**form, "changes": '{"chain_index": 0}'}
    )
    assert "chain_index: Unknown field." in page.content.decode()
    assert not TermsAmendment.objects.exists()
    done = client.post(
        "/admin/leases/termsamendment/add/", {**form, "changes": '{"credit_cap_percent": "40"}'}
    )
    assert done.status_code == 302
    assert TermsAmendment.objects.get().changes == {"credit_cap_percent": "40"}

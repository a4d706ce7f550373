"""Retroactive terms amendments through the API: provider staff propose, only a tenant
admin of the lease's tenant acknowledges, and then the version is in force and linked."""

import pytest
from django.urls import reverse

from leases.choices import Role
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

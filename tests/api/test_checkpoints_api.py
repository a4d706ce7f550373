"""GET /api/v1/leases/{id}/checkpoints/: the lease's signed chain checkpoints, to the
lease's tenant only (the world is tests/api/conftest.py)."""

import pytest
from django.urls import reverse

from accounts.choices import Role
from billing import checkpoints
from billing.ingest import ingest_all
from tests.factories import at

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
CLOSE = at("2026-12-01 02:00")


def test_the_api_lists_checkpoints_to_the_tenant_only(world, client_for):
    ingest_all(notify=False)
    checkpoint, _ = checkpoints.create_checkpoint(
        lease=world.alpha.lease, period=NOVEMBER, now=CLOSE
    )
    url = reverse("api:lease-checkpoints", kwargs={"pk": world.alpha.lease.pk})
    answer = client_for(world.alpha.members[Role.ADMIN]).get(url)
    assert answer.status_code == 200
    assert answer.json() == [checkpoint.document()]
    one = client_for(world.alpha.members[Role.AUDITOR]).get(url + "?period=2026-11")
    assert one.json() == checkpoint.document()
    assert (
        client_for(world.alpha.members[Role.AUDITOR]).get(url + "?period=2026-10").status_code
        == 404
    )
    assert client_for(world.beta.members[Role.ADMIN]).get(url).status_code == 404


def test_a_viewer_may_not_read_checkpoints(world, client_for):
    url = reverse("api:lease-checkpoints", kwargs={"pk": world.alpha.lease.pk})
    assert client_for(world.alpha.members[Role.VIEWER]).get(url).status_code == 403


def test_the_public_key_endpoint_lists_every_key_with_its_validity(client_for):
    answer = client_for(None).get(reverse("api:audit-public-key")).json()
    assert set(answer) == {
        "algorithm",
        "public_key",
        "public_key_pem",
        "fingerprint",
        "keys",
    }
    [key] = answer["keys"]
    assert key["fingerprint"] == answer["fingerprint"]
    assert (key["not_before"], key["not_after"], key["current"]) == (None, None, True)

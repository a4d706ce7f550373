"""The audit, evidence and dispute routes: who may use them, what they answer, and that a
bundle fetched over the API verifies on its own (the world is tests/api/conftest.py)."""

from pathlib import Path

import pytest
from django.urls import reverse

from accounts import services as tokens
from accounts.choices import Role
from billing import audit, invoicing
from billing.ingest import ingest_all
from billing.models import Dispute
from tests.factories import at

pytestmark = pytest.mark.django_db

IPERF3 = Path(__file__).parent.parent / "benchmarks" / "fixtures" / "iperf3"


def audit_url(lease, period="2026-11"):  # type: ignore[no-untyped-def]
    return reverse("api:lease-audit", kwargs={"pk": lease.pk}) + f"?period={period}"


def evidence_url(lease):  # type: ignore[no-untyped-def]
    return reverse("api:lease-evidence", kwargs={"pk": lease.pk})


def evidence_body(side, name="tcp_3.14_macos.json"):  # type: ignore[no-untyped-def]
    return {
        "tool": "iperf3",
        "raw_output": (IPERF3 / name).read_text(),
        "nodes": [node.hostname for node in side.nodes],
        "measured_at": "2026-11-10T01:00:00Z",
    }


# --------------------------------------------------------------------------------------
# The bundle and the key
# --------------------------------------------------------------------------------------


def test_the_public_key_is_published_to_anyone(client_for):
    answer = client_for(None).get(reverse("api:audit-public-key"))
    assert answer.status_code == 200
    assert answer.json()["algorithm"] == "Ed25519"
    assert answer.json()["public_key_pem"].startswith("-----BEGIN PUBLIC KEY-----")


def test_an_auditor_reads_a_bundle_that_verifies_against_the_published_key(world, client_for):
    ingest_all(notify=False)
    invoicing.draft_invoice(tenant=world.alpha.tenant, period="2026-11", now=at("2026-12-02"))
    client = client_for(world.alpha.members[Role.AUDITOR])
    answer = client.get(audit_url(world.alpha.lease))
    assert answer.status_code == 200, answer.json()
    doc = answer.json()
    assert doc["bundle"]["lease"]["reference"] == "ALPHA-1"
    assert {run["id"] for run in doc["bundle"]["runs"]} == {run.pk for run in world.alpha.runs}
    published = client.get(reverse("api:audit-public-key")).json()["public_key"]
    assert audit.verify(doc, published) == []


@pytest.mark.parametrize("period", ["2026-13", "", "November", "1999-12"])
def test_a_bad_period_is_a_400_with_a_sentence(world, client_for, period):
    client = client_for(world.staff)
    answer = client.get(audit_url(world.alpha.lease, period))
    assert answer.status_code == 400
    assert "period" in answer.json()["error"]["fields"]


def test_viewers_and_other_tenants_get_no_bundle(world, client_for):
    lease = world.alpha.lease
    assert client_for(world.alpha.members[Role.VIEWER]).get(audit_url(lease)).status_code == 403
    assert client_for(world.beta.members[Role.AUDITOR]).get(audit_url(lease)).status_code == 404
    assert client_for(world.alpha.members[Role.ADMIN]).get(audit_url(lease)).status_code == 200


def test_a_token_needs_the_audit_scope(world, token_client):
    auditor = world.alpha.members[Role.AUDITOR]
    read_only = tokens.issue_token(user=auditor, scopes=["read"], name="read").secret
    with_audit = tokens.issue_token(user=auditor, scopes=["read", "audit"], name="audit").secret
    lease = world.alpha.lease
    refused = token_client(read_only).get(audit_url(lease))
    assert refused.status_code == 403
    assert "audit" in refused.json()["error"]["message"]
    assert token_client(with_audit).get(audit_url(lease)).status_code == 200


# --------------------------------------------------------------------------------------
# Evidence
# --------------------------------------------------------------------------------------


def test_a_tenant_admin_posts_evidence_and_every_role_reads_it(world, client_for):
    side = world.alpha
    posted = client_for(side.members[Role.ADMIN]).post(
        evidence_url(side.lease), evidence_body(side), format="json"
    )
    assert posted.status_code == 201, posted.json()
    assert posted.json()["verdict"] == "fail"  # 204.7 Mbit/s against 100 Gbps
    assert posted.json()["measured_bps"] == 204_737_447
    listed = client_for(side.members[Role.VIEWER]).get(evidence_url(side.lease))
    assert [item["id"] for item in listed.json()] == [posted.json()["id"]]
    detail = client_for(world.staff).get(
        reverse("api:evidence-detail", kwargs={"pk": posted.json()["id"]})
    )
    assert detail.json()["raw_output"] == evidence_body(side)["raw_output"]
    other = client_for(world.beta.members[Role.ADMIN])
    assert other.get(evidence_url(side.lease)).status_code == 404


def test_unparsable_evidence_is_a_400_with_the_parsers_reason(world, client_for):
    side = world.alpha
    answer = client_for(side.members[Role.ADMIN]).post(
        evidence_url(side.lease),
        evidence_body(side, "tcp_3.9_stored_truncated.json"),
        format="json",
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["fields"]["raw_output"][0].startswith(
        "Unparsable iperf3 output: iperf3 JSON is truncated or invalid"
    )


def test_viewers_and_auditors_cannot_post_evidence(world, client_for):
    side = world.alpha
    for role in (Role.VIEWER, Role.AUDITOR):
        answer = client_for(side.members[role]).post(
            evidence_url(side.lease), evidence_body(side), format="json"
        )
        assert answer.status_code == 403


def test_unknown_fields_in_evidence_are_refused(world, client_for):
    side = world.alpha
    body = {**evidence_body(side), "verdict": "pass"}
    answer = client_for(side.members[Role.ADMIN]).post(
        evidence_url(side.lease), body, format="json"
    )
    assert answer.status_code == 400
    assert "verdict" in answer.json()["error"]["fields"]


# --------------------------------------------------------------------------------------
# Disputes
# --------------------------------------------------------------------------------------


def open_dispute(client, side, **extra):  # type: ignore[no-untyped-def]
    body = {
        "lease": side.lease.pk,
        "reason": "The 02:00 sample overlapped our own all-reduce.",
        "probe_run": side.runs[0].pk,
        **extra,
    }
    return client.post(reverse("api:dispute-list"), body, format="json")


def test_a_dispute_is_opened_by_the_tenant_and_accepted_by_the_provider(world, client_for):
    side = world.alpha
    admin = client_for(side.members[Role.ADMIN])
    opened = open_dispute(admin, side)
    assert opened.status_code == 201, opened.json()
    dispute_id = opened.json()["id"]
    accept = reverse("api:dispute-accept", kwargs={"pk": dispute_id})
    assert admin.post(accept, {"reason": "mine"}, format="json").status_code == 403
    decided = client_for(world.staff).post(
        accept, {"reason": "Confirmed.", "credit_cny": "250.00"}, format="json"
    )
    assert decided.status_code == 200, decided.json()
    assert decided.json()["state"] == "accepted"
    assert [event["action"] for event in decided.json()["events"]] == ["opened", "accepted"]
    again = client_for(world.staff).post(accept, {"reason": "twice"}, format="json")
    assert again.status_code == 400
    assert Dispute.objects.get(pk=dispute_id).credit_cny == 250


def test_a_dispute_cannot_name_another_tenants_objects(world, client_for):
    side, other = world.alpha, world.beta
    admin = client_for(side.members[Role.ADMIN])
    answer = open_dispute(admin, side, probe_run=other.runs[0].pk)
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"probe_run": ["No such object."]}
    answer = open_dispute(admin, other)
    assert answer.status_code == 400
    assert "lease" in answer.json()["error"]["fields"]


def test_disputes_are_listed_per_tenant_and_rejected_with_a_reason(
    world, client_for, django_assert_max_num_queries
):
    for side in (world.alpha, world.beta):
        open_dispute(client_for(side.members[Role.ADMIN]), side)
        open_dispute(client_for(side.members[Role.ADMIN]), side, incident=side.incident.pk)
    viewer = client_for(world.alpha.members[Role.VIEWER])
    with django_assert_max_num_queries(8):
        listed = viewer.get(reverse("api:dispute-list"))
    body = listed.json()
    rows = body["results"] if isinstance(body, dict) else body
    assert {row["lease_reference"] for row in rows} == {"ALPHA-1"}
    beta_dispute = Dispute.objects.filter(lease=world.beta.lease).first()
    detail = reverse("api:dispute-detail", kwargs={"pk": beta_dispute.pk})
    assert viewer.get(detail).status_code == 404
    reject = reverse("api:dispute-reject", kwargs={"pk": beta_dispute.pk})
    rejected = client_for(world.staff).post(reject, {"reason": "Not our fault."}, format="json")
    assert rejected.status_code == 200
    assert rejected.json()["decision_reason"] == "Not our fault."


def test_raw_1_carries_each_runs_raw_output_and_the_verifier_re_hashes_it(world, client_for):
    import hashlib

    client = client_for(world.alpha.members[Role.AUDITOR])
    refused = client.get(audit_url(world.alpha.lease) + "&raw=maybe")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"raw": ["raw must be 1 or 0, got 'maybe'."]}
    doc = client.get(audit_url(world.alpha.lease) + "&raw=1").json()
    first = next(r for r in doc["bundle"]["runs"] if r["id"] == world.alpha.runs[0].pk)
    # The world rewrote this run's stored text after the fact, leaving its hash.
    assert first["raw_output"] == "raw output of alpha\n"
    published = client.get(reverse("api:audit-public-key")).json()["public_key"]
    digest = hashlib.sha256(b"raw output of alpha\n").hexdigest()
    stored = hashlib.sha256(b"iperf3 output of alpha\n").hexdigest()
    assert (
        f"run {first['id']} (throughput alpha-n1>alpha-n2): its raw output hashes to {digest}, "
        f"the run says {stored}"
    ) in audit.verify(doc, published)
    plain = client.get(audit_url(world.alpha.lease)).json()
    assert not any("raw_output" in run for run in plain["bundle"]["runs"])

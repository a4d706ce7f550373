"""The tenant's signing keys and the records it co-signs, over HTTP (issue 29): a customer's
script fetches the content to sign, signs its canonical text with its own Ed25519 key
(here: Python's cryptography, nothing of ours) and sends the signature back; the server
refuses what does not verify, saying why, and the month's bundle then verifies."""

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from rest_framework.test import APIClient

from accounts.choices import Role
from benchmarks.links import link_pending
from benchmarks.models import ProbeRun
from billing import invoicing
from gpulease_verify.bundle import verify_report
from gpulease_verify.canonical import canonical_json
from leases import services
from leases.models import TenantKey, TenantLink
from tests.billing.test_audit import AFTER_NOVEMBER, NOVEMBER, month  # noqa: F401
from tests.factories import MembershipFactory, StaffFactory, TenantFactory, at

pytestmark = pytest.mark.django_db

KEYS = "/api/v1/tenant-keys/"


def client(user: Any) -> APIClient:
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(user)
    return api


def public_text(private: Ed25519PrivateKey) -> str:
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def sign(private: Ed25519PrivateKey, answer: dict[str, Any]) -> str:
    """What a customer's script does with a signing-content answer: sign the UTF-8 bytes
    of ``canonical`` (checked to be the content's canonical JSON)."""
    assert answer["canonical"] == canonical_json(answer["content"])
    return base64.b64encode(private.sign(answer["canonical"].encode("utf-8"))).decode()


def fields_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 400, response.content[:300]
    return response.json()["error"]["fields"]


@pytest.fixture
def tenant(month):  # type: ignore[no-untyped-def]  # noqa: F811
    """November of the month fixture, chained, with the tenant's admin Ada, viewer Vic,
    an admin of another tenant and provider staff."""
    link_pending(lease_id=month.pk, now=AFTER_NOVEMBER)

    def member(name: str, role: str) -> Any:
        return MembershipFactory(tenant=month.tenant, role=role, user__username=name).user

    other = MembershipFactory(
        tenant=TenantFactory(slug="other"), role=Role.ADMIN, user__username="olga"
    ).user
    return {
        "lease": month,
        "slug": month.tenant.slug,
        "ada": member("ada", Role.ADMIN),
        "vic": member("vic", Role.VIEWER),
        "olga": other,
        "staff": StaffFactory(username="provider"),
    }


def register(t: dict[str, Any], private: Ed25519PrivateKey, label: str = "laptop") -> dict:
    ada = client(t["ada"])
    asked = ada.post(
        f"{KEYS}signing-content/",
        {"tenant": t["slug"], "public_key": public_text(private)},
        format="json",
    )
    assert asked.status_code == 200, asked.content[:300]
    answer = asked.json()
    response = ada.post(
        KEYS,
        {
            "tenant": t["slug"],
            "public_key": public_text(private),
            "signed_at": answer["signed_at"],
            "signature": sign(private, answer),
            "label": label,
        },
        format="json",
    )
    assert response.status_code == 201, response.content[:300]
    return response.json()


def propose(t: dict[str, Any]) -> Any:
    return services.propose_retroactive_amendment(
        lease=t["lease"],
        effective_from=at("2026-11-02 00:00"),
        changes={"credit_cap_percent": "0"},
        reason="The cap was waived.",
    )


def acknowledgement(t: dict[str, Any], amendment: Any, reason: str = "Agreed.") -> dict:
    response = client(t["ada"]).post(
        f"/api/v1/terms-amendments/{amendment.pk}/signing-content/",
        {"reason": reason},
        format="json",
    )
    assert response.status_code == 200, response.content[:300]
    return response.json()


def acknowledge(t: dict[str, Any], amendment: Any, body: dict[str, Any]) -> Any:
    return client(t["ada"]).post(
        f"/api/v1/terms-amendments/{amendment.pk}/acknowledge/", body, format="json"
    )


def test_a_tenant_admin_registers_a_key_and_every_member_lists_it(tenant):  # type: ignore[no-untyped-def]
    private = Ed25519PrivateKey.generate()
    asked = client(tenant["ada"]).post(
        f"{KEYS}signing-content/",
        {"tenant": tenant["slug"], "public_key": public_text(private)},
        format="json",
    )
    content = asked.json()["content"]
    assert content == {
        "purpose": "gpulease-cosign-v1:key_registered",
        "tenant": tenant["slug"],
        "by": "ada",
        "role": "admin",
        "at": asked.json()["signed_at"],
        "public_key": public_text(private),
    }
    key = register(tenant, private)
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert key["fingerprint"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert (key["tenant"], key["label"], key["registered_by_username"]) == (
        tenant["slug"],
        "laptop",
        "ada",
    )
    assert key["revoked_at"] is None
    for who in ("ada", "vic", "staff"):
        listed = client(tenant[who]).get(KEYS).json()["results"]
        assert [row["fingerprint"] for row in listed] == [key["fingerprint"]], who
    assert client(tenant["olga"]).get(KEYS).json()["results"] == []
    # One registration link on the tenant's (only) lease.
    assert TenantLink.objects.filter(lease=tenant["lease"], kind="key_registered").count() == 1


def test_a_signed_acknowledgement_is_taken_and_the_bundle_verifies(tenant):  # type: ignore[no-untyped-def]
    private = Ed25519PrivateKey.generate()
    key = register(tenant, private)
    amendment = propose(tenant)
    answer = acknowledgement(tenant, amendment)
    assert answer["content"]["amendment"] == amendment.pk
    assert answer["content"]["changes"] == {"credit_cap_percent": "0"}
    response = acknowledge(
        tenant,
        amendment,
        {"reason": "Agreed.", "signed_at": answer["signed_at"], "signature": sign(private, answer)},
    )
    assert response.status_code == 200, response.content[:300]
    assert response.json()["status"] == "acknowledged"
    invoicing.draft_invoice(tenant=tenant["lease"].tenant, period=NOVEMBER, now=AFTER_NOVEMBER)

    ada = client(tenant["ada"])
    bundle = ada.get(f"/api/v1/leases/{tenant['lease'].pk}/audit/", {"period": NOVEMBER})
    assert bundle.status_code == 200, bundle.content[:300]
    doc = bundle.json()
    links = doc["bundle"]["tenant_links"]
    link = next(item for item in links if item["content"]["kind"] == "acknowledgement")
    assert link["content"]["signature"] == sign(private, answer)
    assert link["content"]["key"] == key["fingerprint"]
    published = ada.get("/api/v1/audit/public-key/").json()["public_key_pem"]
    assert verify_report(doc, published)[0] == []


def test_a_bad_signature_is_a_400_saying_why(tenant):  # type: ignore[no-untyped-def]
    private, stranger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    register(tenant, private)
    amendment = propose(tenant)
    answer = acknowledgement(tenant, amendment)
    at_text = answer["signed_at"]
    slug = tenant["lease"].tenant.name
    cases = {
        "by another key": (
            {"signed_at": at_text, "signature": sign(stranger, answer)},
            {
                "signature": [
                    f"The signature does not verify with any key of tenant {slug} valid at "
                    f"{at_text}."
                ]
            },
        ),
        "over another reason": (
            {
                "reason": "Agreed, in part.",
                "signed_at": at_text,
                "signature": sign(private, answer),
            },
            {
                "signature": [
                    f"The signature does not verify with any key of tenant {slug} valid at "
                    f"{at_text}."
                ]
            },
        ),
        "not 64 bytes": (
            {"signed_at": at_text, "signature": "c2hvcnQ="},
            {"signature": ["A signature is the base64 of 64 bytes (Ed25519)."]},
        ),
        "without its time": (
            {"signature": sign(private, answer)},
            {"signed_at": ["A signature needs the signed content's time."]},
        ),
        "unsigned": (
            {},
            {
                "signature": [
                    f"Tenant {slug} has registered signing keys: this record needs the "
                    "tenant's signature over its content."
                ]
            },
        ),
    }
    for name, (extra, expected) in cases.items():
        response = acknowledge(tenant, amendment, {"reason": "Agreed.", **extra})
        assert fields_of(response) == expected, name
    amendment.refresh_from_db()
    assert amendment.status == "pending"

    # A registration whose signature is not the new key's own.
    other = Ed25519PrivateKey.generate()
    asked = (
        client(tenant["ada"])
        .post(
            f"{KEYS}signing-content/",
            {"tenant": tenant["slug"], "public_key": public_text(other)},
            format="json",
        )
        .json()
    )
    response = client(tenant["ada"]).post(
        KEYS,
        {
            "tenant": tenant["slug"],
            "public_key": public_text(other),
            "signed_at": asked["signed_at"],
            "signature": sign(stranger, asked),
        },
        format="json",
    )
    assert fields_of(response) == {
        "signature": [
            "The signature is not this key's signature over its registration: sign the "
            "registration content with the key's private half."
        ]
    }
    assert TenantKey.objects.count() == 1


def test_viewers_other_tenants_and_staff_are_refused(tenant):  # type: ignore[no-untyped-def]
    private = Ed25519PrivateKey.generate()
    key = register(tenant, private)
    amendment = propose(tenant)
    body = {"tenant": tenant["slug"], "public_key": public_text(Ed25519PrivateKey.generate())}
    content_url = f"/api/v1/terms-amendments/{amendment.pk}/signing-content/"
    revoke_url = f"{KEYS}{key['id']}/revoke/"

    vic = client(tenant["vic"])
    assert vic.post(f"{KEYS}signing-content/", body, format="json").status_code == 403
    assert vic.post(content_url, {"reason": "x"}, format="json").status_code == 403
    assert vic.post(revoke_url, format="json").status_code == 403

    olga = client(tenant["olga"])
    assert olga.post(content_url, {"reason": "x"}, format="json").status_code == 404
    assert olga.post(revoke_url, format="json").status_code == 404
    assert olga.get(f"{KEYS}{key['id']}/").status_code == 404
    assert fields_of(olga.post(f"{KEYS}signing-content/", body, format="json")) == {
        "tenant": ["No such object."]
    }

    staff = client(tenant["staff"])
    name = tenant["lease"].tenant.name
    refused = staff.post(f"{KEYS}signing-content/", body, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == (
        f"Only a tenant admin of {name} can register its signing keys. Provider staff never "
        "act as a tenant user."
    )
    assert staff.post(content_url, {"reason": "x"}, format="json").status_code == 403
    assert staff.post(revoke_url, format="json").status_code == 403
    assert TenantKey.objects.get().revoked_at is None


def test_after_revoking_a_key_its_signatures_are_refused(tenant):  # type: ignore[no-untyped-def]
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    first = register(tenant, old, label="old laptop")
    register(tenant, new, label="new laptop")
    ada = client(tenant["ada"])
    revoked = ada.post(f"{KEYS}{first['id']}/revoke/", format="json")
    assert revoked.status_code == 200, revoked.content[:300]
    assert revoked.json()["revoked_by_username"] == "ada"
    again = ada.post(f"{KEYS}{first['id']}/revoke/", format="json")
    assert again.status_code == 400
    assert again.json()["error"]["message"].startswith(f"Key {first['fingerprint']} was already")

    amendment = propose(tenant)
    answer = acknowledgement(tenant, amendment)
    body = {"reason": "Agreed.", "signed_at": answer["signed_at"]}
    refused = acknowledge(tenant, amendment, {**body, "signature": sign(old, answer)})
    assert fields_of(refused)["signature"][0].startswith("The signature does not verify with")
    taken = acknowledge(tenant, amendment, {**body, "signature": sign(new, answer)})
    assert taken.status_code == 200, taken.content[:300]


def test_a_signed_dispute_and_acceptance_sign_off(tenant):  # type: ignore[no-untyped-def]
    private = Ed25519PrivateKey.generate()
    register(tenant, private)
    lease = tenant["lease"]
    ada = client(tenant["ada"])
    failed = ProbeRun.objects.get(lease=lease, verdict="fail", kind="throughput")
    claim = {
        "lease": lease.pk,
        "reason": "  Our own job shared the link.  ",
        "probe_run": failed.pk,
    }
    answer = ada.post("/api/v1/disputes/signing-content/", claim, format="json").json()
    assert answer["content"]["reason"] == "Our own job shared the link."  # as it is kept
    assert answer["content"]["probe_run"] == {"id": failed.pk, "run_hash": failed.run_hash}
    unsigned = ada.post("/api/v1/disputes/", claim, format="json")
    assert list(fields_of(unsigned)) == ["signature"]
    opened = ada.post(
        "/api/v1/disputes/",
        {**claim, "signed_at": answer["signed_at"], "signature": sign(private, answer)},
        format="json",
    )
    assert opened.status_code == 201, opened.content[:300]

    run = ProbeRun.objects.get(lease=lease, trigger="acceptance")
    url = f"/api/v1/leases/{lease.pk}/acceptance-signing-content/"
    answer = ada.post(url, {"run": run.pk}, format="json").json()
    assert answer["content"]["run"] == {
        "id": run.pk,
        "chain_index": run.chain_index,
        "run_hash": run.run_hash,
        "verdict": "pass",
    }
    signed_off = ada.post(
        f"/api/v1/leases/{lease.pk}/acceptance-sign-off/",
        {"run": run.pk, "signed_at": answer["signed_at"], "signature": sign(private, answer)},
        format="json",
    )
    assert signed_off.status_code == 201, signed_off.content[:300]
    assert signed_off.json()["kind"] == "acceptance"
    assert list(
        TenantLink.objects.filter(lease=lease)
        .order_by("chain_index")
        .values_list("kind", flat=True)
    ) == ["key_registered", "dispute", "acceptance"]

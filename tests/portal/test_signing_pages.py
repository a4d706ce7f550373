"""The signing keys page and the amendment page (issue 29) through Django's test client: a
tenant admin registers a key by pasting its public half and the signature of what the page
shows, acknowledges an amendment with a signature over the content the page shows, and
revokes the key after confirming; viewers only read; staff have no keys page. No page
carries an inline script or event handler (the CSP forbids them)."""

import base64
import html
import json
import re
import shlex

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from accounts.choices import Role
from gpulease_verify.canonical import canonical_json
from leases import services
from leases.models import TenantKey, TenantLink, TermsAmendment
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease
from tests.portal.support import active, client_for

pytestmark = pytest.mark.django_db

KEYS = "/signing-keys/"


@pytest.fixture
def world():  # type: ignore[no-untyped-def]
    admin = MembershipFactory(role=Role.ADMIN, user__username="ada", tenant__slug="zhiyuan")
    viewer = MembershipFactory(role=Role.VIEWER, user__username="vic", tenant=admin.tenant)
    lease = active(make_lease(tenant=admin.tenant, reference="ZY-7", nodes=[NodeFactory()]))
    return {"ada": admin.user, "vic": viewer.user, "tenant": admin.tenant, "lease": lease}


def public_text(private: Ed25519PrivateKey) -> str:
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def shown(page: str) -> dict[str, str]:
    """What a page shows to sign: the canonical text (its json_script) and the hidden
    signed_at it will send back."""
    canonical = re.search(
        r'<script id="canonical-data" type="application/json">(.*?)</script>', page
    )
    signed_at = re.search(r'name="(?:[\w-]+-)?signed_at" value="([^"]+)"', page)
    assert canonical and signed_at, page[:2000]
    return {"canonical": json.loads(canonical.group(1)), "signed_at": signed_at.group(1)}


def sign(private: Ed25519PrivateKey, text: str) -> str:
    return base64.b64encode(private.sign(text.encode("utf-8"))).decode()


def register(client, private: Ed25519PrivateKey, label: str = "laptop"):  # type: ignore[no-untyped-def]
    form = {"tenant": "zhiyuan", "zhiyuan-public_key": public_text(private), "zhiyuan-label": label}
    page = client.post(KEYS, {**form, "action": "prepare"})
    assert page.status_code == 200, page.content[:500]
    what = shown(page.content.decode())
    return client.post(
        KEYS,
        {
            **form,
            "action": "register",
            "zhiyuan-signed_at": what["signed_at"],
            "zhiyuan-signature": sign(private, what["canonical"]),
        },
    )


def no_inline_script(page: str) -> None:
    assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", page)
    assert not re.search(r"\son[a-z]+\s*=", page), "an inline event handler"


def test_a_tenant_admin_registers_a_pasted_key_and_members_read_it(world):  # type: ignore[no-untyped-def]
    ada = client_for(world["ada"])
    private = Ed25519PrivateKey.generate()
    page = ada.post(
        KEYS, {"tenant": "zhiyuan", "zhiyuan-public_key": public_text(private), "action": "prepare"}
    ).content.decode()
    what = shown(page)
    assert json_of(what["canonical"])["public_key"] == public_text(private)
    assert json_of(what["canonical"])["by"] == "ada"
    assert canonical_json(json_of(what["canonical"])) == what["canonical"]
    # The fallback command line saves exactly the canonical text, quoted for the shell.
    assert html.escape(f"printf '%s' {shlex.quote(what['canonical'])} > content.json") in page
    assert "gpulease-verify sign --key KEY.pem content.json" in page
    no_inline_script(page)

    response = register(ada, private)
    assert response.status_code == 302, response.content[:500]
    key = TenantKey.objects.get()
    assert (key.label, key.registered_by_username) == ("laptop", "ada")
    listing = ada.get(KEYS).content.decode()
    assert key.fingerprint in listing and "Revoke" in listing
    no_inline_script(listing)

    vic = client_for(world["vic"])
    read_only = vic.get(KEYS).content.decode()
    assert key.fingerprint in read_only
    assert "signing-key-revoke" not in read_only and "/revoke/" not in read_only
    assert "Register a key" not in read_only
    refused = vic.post(
        KEYS, {"tenant": "zhiyuan", "zhiyuan-public_key": public_text(private), "action": "prepare"}
    )
    assert refused.status_code == 403
    assert 'href="/signing-keys/"' in read_only  # in the tenant's navigation


def json_of(text: str) -> dict:
    return json.loads(text)


def test_a_wrong_registration_signature_is_shown_on_the_form(world):  # type: ignore[no-untyped-def]
    ada = client_for(world["ada"])
    private, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    form = {"tenant": "zhiyuan", "zhiyuan-public_key": public_text(private)}
    what = shown(ada.post(KEYS, {**form, "action": "prepare"}).content.decode())
    response = ada.post(
        KEYS,
        {
            **form,
            "action": "register",
            "zhiyuan-signed_at": what["signed_at"],
            "zhiyuan-signature": sign(other, what["canonical"]),
        },
    )
    assert response.status_code == 400
    assert "is not this key&#x27;s signature over its registration" in response.content.decode()
    garbage = ada.post(KEYS, {"tenant": "zhiyuan", "zhiyuan-public_key": "no", "action": "prepare"})
    assert garbage.status_code == 400
    assert "Not an Ed25519 public key" in garbage.content.decode()
    assert not TenantKey.objects.exists()


def test_staff_have_no_keys_page(world):  # type: ignore[no-untyped-def]
    staff = client_for(StaffFactory())
    assert staff.get(KEYS).status_code == 404
    assert 'href="/signing-keys/"' not in staff.get("/").content.decode()


def test_a_signed_acknowledgement_through_the_amendment_page(world):  # type: ignore[no-untyped-def]
    ada = client_for(world["ada"])
    private = Ed25519PrivateKey.generate()
    register(ada, private)
    amendment = services.propose_retroactive_amendment(
        lease=world["lease"],
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="Signed on the 10th, recorded late.",
    )
    url = f"/amendments/{amendment.pk}/"
    lease_page = ada.get(f"/leases/{world['lease'].pk}/").content.decode()
    assert f'href="{url}"' in lease_page
    # The tenant holds a key: the first step shows what to sign, with the reason in it.
    page = ada.post(url, {"reason": "We agreed on the 10th.", "action": "prepare"})
    what = shown(page.content.decode())
    content = json_of(what["canonical"])
    assert (content["reason"], content["amendment"]) == ("We agreed on the 10th.", amendment.pk)
    assert content["changes"] == {"credit_cap_percent": "40"}
    no_inline_script(page.content.decode())
    # Unsigned, or signed by a stranger: refused with the reason, still pending.
    body = {"reason": "We agreed on the 10th.", "action": "acknowledge"}
    unsigned = ada.post(url, body)
    assert unsigned.status_code == 200  # shown what to sign again: nothing acknowledged
    stranger = ada.post(
        url,
        {
            **body,
            "signed_at": what["signed_at"],
            "signature": sign(Ed25519PrivateKey.generate(), what["canonical"]),
        },
    )
    assert stranger.status_code == 400
    assert "The signature does not verify with any key of tenant" in stranger.content.decode()
    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.PENDING

    done = ada.post(
        url, {**body, "signed_at": what["signed_at"], "signature": sign(private, what["canonical"])}
    )
    assert done.status_code == 302, done.content[:500]
    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.ACKNOWLEDGED
    link = TenantLink.objects.get(kind="acknowledgement")
    assert link.content["signature"] == sign(private, what["canonical"])

    # The viewer reads the amendment and cannot acknowledge.
    vic = client_for(world["vic"])
    assert vic.get(url).status_code == 200
    assert vic.post(url, body).status_code == 403


def test_revoking_needs_the_confirmation(world):  # type: ignore[no-untyped-def]
    ada = client_for(world["ada"])
    register(ada, Ed25519PrivateKey.generate())
    key = TenantKey.objects.get()
    url = f"/signing-keys/{key.pk}/revoke/"
    unconfirmed = ada.post(url)
    assert unconfirmed.status_code == 400
    assert f"Tick the confirmation to revoke key {key.fingerprint}." in unconfirmed.content.decode()
    assert client_for(world["vic"]).post(url, {"confirm": "yes"}).status_code == 403
    assert ada.post(url, {"confirm": "yes"}).status_code == 302
    key.refresh_from_db()
    assert key.revoked_by_username == "ada"
    row = re.search(
        rf'<tr data-fingerprint="{key.fingerprint}" data-state="(\w+)"',
        ada.get(KEYS).content.decode(),
    )
    assert row and row.group(1) == "revoked"

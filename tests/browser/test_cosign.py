"""Signing in the browser (issue 29), in Debian's chromium (WebCrypto has Ed25519 from
Chromium 137): a tenant admin generates a key on the signing keys page, which registers it
and offers the private key once; then acknowledges an amendment, signing the content the
page shows with that key file, and the server takes the signature."""

import base64
import json
from pathlib import Path

import pytest
from django.db import transaction

from accounts.choices import Role
from leases import services
from leases.models import TenantKey, TenantLink, TermsAmendment
from tests.factories import MembershipFactory, NodeFactory, at, make_lease
from tests.portal.support import active


@pytest.fixture
def amendment():  # type: ignore[no-untyped-def]
    with transaction.atomic():
        member = MembershipFactory(role=Role.ADMIN, user__username="ada", tenant__slug="zhiyuan")
        lease = active(make_lease(tenant=member.tenant, reference="ZY-9", nodes=[NodeFactory()]))
        return services.propose_retroactive_amendment(
            lease=lease,
            effective_from=at("2026-11-10 00:00"),
            changes={"credit_cap_percent": "40"},
            reason="Signed on the 10th, recorded late.",
        )


def test_generate_a_key_then_sign_an_acknowledgement_in_the_browser(
    page, log_in, screenshot, amendment, tmp_path
):
    admin = amendment.lease.tenant.memberships.get().user
    log_in(admin)
    page.locator("nav").get_by_role("link", name="Signing keys").click()
    page.wait_for_url("**/signing-keys/")
    keygen = page.locator("[data-keygen]")
    keygen.wait_for(state="visible")  # shown only where WebCrypto signs with Ed25519
    keygen.locator("[data-keygen-label]").fill("browser key")
    keygen.get_by_role("button", name="Generate a key in this browser and register it").click()
    status = keygen.locator("[data-keygen-status][data-fingerprint]")
    status.wait_for()
    fingerprint = status.get_attribute("data-fingerprint")
    with page.expect_download() as download_info:
        keygen.locator("[data-keygen-download] a").click()
    pem = tmp_path / "key.pem"
    download_info.value.save_as(pem)
    assert pem.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")
    key = TenantKey.objects.get()
    assert (key.fingerprint, key.label, key.registered_by_username) == (
        fingerprint,
        "browser key",
        "ada",
    )
    page.locator("[data-keygen-download]").wait_for(state="hidden")  # offered once
    page.reload()
    assert page.locator(f'tr[data-fingerprint="{fingerprint}"]').is_visible()
    screenshot("keys")

    page.goto(f"/amendments/{amendment.pk}/")
    page.get_by_label("Reason").fill("We agreed on the 10th.")
    page.get_by_role("button", name="Show what to sign").click()
    sign_here = page.locator("[data-cosign]")
    sign_here.locator("[data-webcrypto]").wait_for(state="visible")
    assert sign_here.locator("[data-fallback]").is_hidden()
    assert '"reason":"We agreed on the 10th."' in sign_here.locator("pre.canonical").text_content()
    sign_here.locator("[data-key-file]").set_input_files(str(Path(pem)))
    sign_here.get_by_role("button", name="Sign in this browser").click()
    page.wait_for_function("document.querySelector('input[name=signature]').value.length > 80")
    screenshot("signed")
    page.get_by_role("button", name="Acknowledge").click()
    page.wait_for_url(f"**/leases/{amendment.lease_id}/")

    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.ACKNOWLEDGED
    link = TenantLink.objects.get(kind="acknowledgement")
    assert link.content["key"] == fingerprint
    assert link.content["signed"]["reason"] == "We agreed on the 10th."


# What a browser without Ed25519 in WebCrypto answers (Chromium before 137, for one).
NO_ED25519 = """
(() => {
  const generate = crypto.subtle.generateKey.bind(crypto.subtle);
  crypto.subtle.generateKey = (algorithm, ...rest) =>
    (algorithm && algorithm.name === "Ed25519")
      ? Promise.reject(new DOMException("Unrecognized name.", "NotSupportedError"))
      : generate(algorithm, ...rest);
})();
"""


def test_without_ed25519_in_the_browser_the_page_offers_the_command_line(
    page, log_in, screenshot, amendment
):
    from gpulease_verify import cosign as rules
    from tests.factories import register_tenant_key

    admin = amendment.lease.tenant.memberships.get().user
    private, _ = register_tenant_key(admin, amendment.lease.tenant)
    page.add_init_script(NO_ED25519)
    log_in(admin)
    page.goto("/signing-keys/")
    assert page.locator("[data-keygen]").is_hidden()  # no key generation offered

    page.goto(f"/amendments/{amendment.pk}/")
    page.get_by_label("Reason").fill("Agreed.")
    page.get_by_role("button", name="Show what to sign").click()
    fallback = page.locator("[data-cosign] [data-fallback]")
    fallback.wait_for(state="visible")
    assert page.locator("[data-cosign] [data-webcrypto]").is_hidden()
    assert "gpulease-verify sign --key KEY.pem content.json" in fallback.text_content()
    screenshot("fallback")
    # What the command line would print, pasted.
    canonical = page.locator("pre.canonical").text_content()
    signature = base64.b64encode(private.sign(canonical.encode("utf-8"))).decode()
    assert rules.verifies(private.public_key(), json.loads(canonical), signature)
    page.get_by_label("Signature").fill(signature)
    page.get_by_role("button", name="Acknowledge").click()
    page.wait_for_url(f"**/leases/{amendment.lease_id}/")
    amendment.refresh_from_db()
    assert amendment.status == TermsAmendment.Status.ACKNOWLEDGED

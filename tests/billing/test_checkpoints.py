"""Signed chain checkpoints: made once per lease and month at the close, published to the
tenant (API, webhook), carried in bundles, and `--previous` catching a dropped or
re-hashed tail."""

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from standardwebhooks import Webhook

from benchmarks.links import run_content
from benchmarks.models import ProbeRun
from billing import audit, checkpoints, notifications
from billing.ingest import ingest_all
from billing.models import ChainCheckpoint
from gpulease_verify import cli, webhooks
from gpulease_verify.chain import link_hash
from gpulease_verify.checkpoints import FORMAT
from gpulease_verify.trust import Trust
from incidents import notifications as incident_notifications
from leases import services
from leases.choices import LeaseStatus
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
CLOSE = at("2026-12-01 02:00")  # after November's close in Asia/Shanghai
SECRET = webhooks.new_secret()


@pytest.fixture
def lease():  # type: ignore[no-untyped-def]
    """Six hourly samples in November and one of December's first hour (Shanghai)."""
    lease = make_lease(nodes=NodeFactory.create_batch(2))
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for hour in range(6):
        make_run(
            lease, slot=at("2026-11-10 10:00") + timedelta(hours=hour), measured_bps=98 * 10**9
        )
    make_run(lease, slot=at("2026-12-01 00:10"), measured_bps=98 * 10**9)
    ingest_all(notify=False)
    return lease


def november_runs(lease):  # type: ignore[no-untyped-def]
    return ProbeRun.objects.filter(lease=lease, slot_at__lt=at("2026-12-01 00:00"))


def last_link(lease):  # type: ignore[no-untyped-def]
    """November's last link (December's run is linked after it)."""
    return november_runs(lease).order_by("-chain_index").first().chain_index


def test_a_checkpoint_is_signed_once_per_lease_and_month(lease):
    checkpoint, created = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    assert created
    last = november_runs(lease).order_by("-chain_index").first()
    assert (checkpoint.head_index, checkpoint.head_hash) == (last.chain_index, last.run_hash)
    assert checkpoint.period_links == 6
    document = checkpoint.document()
    assert document["checkpoint"]["format"] == FORMAT
    assert document["checkpoint"]["lease"] == lease.reference
    assert document["checkpoint"]["head"] == {"index": last.chain_index, "hash": last.run_hash}
    assert document["key_id"] == audit.published_key_info()["fingerprint"]
    trust = Trust.of(audit.published_key_info())
    body = json.dumps(document["checkpoint"], sort_keys=True, separators=(",", ":"))
    mismatches, _notes = trust.check(
        document, body.encode(), what="it", at=document["checkpoint"]["signed_at"]
    )
    assert mismatches == []

    again, created = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    assert (again.pk, created) == (checkpoint.pk, False)
    call_command("chain_checkpoint", "--period", NOVEMBER, "--lease", lease.reference)
    assert ChainCheckpoint.objects.filter(lease=lease).count() == 1


def test_the_command_signs_every_billed_lease_and_refuses_a_bad_period(lease, capsys):
    call_command("chain_checkpoint", "--period", NOVEMBER)
    out = capsys.readouterr().out
    assert f"{lease.reference} 2026-11: signed, head link {last_link(lease)} " in out
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("chain_checkpoint", "--period", "2026-13")


def test_the_beat_task_closes_the_month_that_has_just_ended(lease):
    assert checkpoints.close_due(now=CLOSE) == 1
    assert checkpoints.close_due(now=CLOSE + timedelta(hours=1)) == 0
    assert ChainCheckpoint.objects.get(lease=lease).period == NOVEMBER


def test_the_tenant_webhook_gets_the_signed_checkpoint(
    lease, monkeypatch, django_capture_on_commit_callbacks
):
    type(lease.tenant).objects.filter(pk=lease.tenant_id).update(
        webhook_url="https://hooks.example.com/gpulease", webhook_secret=SECRET
    )
    sent = []
    monkeypatch.setattr(incident_notifications.egress, "check_url_for_webhooks", lambda url: url)
    monkeypatch.setattr(
        incident_notifications,
        "_post",
        lambda shown, dest, body, headers: sent.append((body, headers)),
    )
    # The task, run here instead of on a worker (it is sent by name, common.tasks.send).
    monkeypatch.setattr(
        "billing.checkpoints.send",
        lambda name, pk: (
            name == "billing.notify_checkpoint" and notifications.send_checkpoint(checkpoint_id=pk)
        ),
    )
    with django_capture_on_commit_callbacks(execute=True):
        checkpoint, _ = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    [(body, headers)] = sent
    assert headers["X-Gpulease-Event"] == "chain.checkpoint"
    assert Webhook(SECRET).verify(body, headers) == json.loads(body)
    assert (
        incident_notifications.legacy_signature(body=body, secret=SECRET)
        == headers["X-Gpulease-Signature"]
    )
    assert json.loads(body)["checkpoint"] == checkpoint.document()


# --------------------------------------------------------------------------------------
# Bundles and --previous
# --------------------------------------------------------------------------------------


def verify_cli(tmp_path, doc, *args):  # type: ignore[no-untyped-def]
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps(doc))
    key = tmp_path / "keys.json"
    key.write_text(json.dumps(audit.published_key_info()))
    lines = []

    class Out:
        def write(self, text):  # type: ignore[no-untyped-def]
            lines.append(text)

    code = cli.run([str(bundle), "--public-key", str(key), *args], out=Out())  # type: ignore[arg-type]
    return code, "".join(lines)


def test_a_bundle_carries_its_checkpoints_and_verifies(lease, tmp_path):
    checkpoints.create_checkpoint(lease=lease, period="2026-10", now=at("2026-11-01 02:00"))
    checkpoint, _ = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    assert [c["checkpoint"]["period"] for c in doc["bundle"]["checkpoints"]] == [
        "2026-10",
        NOVEMBER,
    ]
    assert audit.verify(doc, audit.published_key_info()) == []
    saved = tmp_path / "checkpoint.json"
    saved.write_text(json.dumps(checkpoint.document()))
    code, out = verify_cli(tmp_path, doc, "--previous", str(saved))
    assert code == 0, out
    last = last_link(lease)
    assert f"ok: checkpoint of 2026-11: link {last} is in this bundle with that hash" in out


def test_a_dropped_tail_is_caught_with_previous(lease, tmp_path):
    checkpoint, _ = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    saved = tmp_path / "checkpoint.json"
    saved.write_text(json.dumps(checkpoint.document()))
    last = last_link(lease)
    # The insider deletes November's last two runs and December's one, and the checkpoint.
    ProbeRun.objects.filter(lease=lease, chain_index__gte=last - 1).delete()
    ChainCheckpoint.objects.all().delete()
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    code, out = verify_cli(tmp_path, doc, "--previous", str(saved))
    assert code == 1
    assert (
        f"MISMATCH: the checkpoint of 2026-11 names link {last} with hash "
        f"{checkpoint.head_hash[:8]}…; this bundle's chain ends at link {last - 2}: links "
        "were removed"
    ) in out


def test_a_last_link_altered_and_rehashed_is_caught_with_previous(lease, tmp_path):
    checkpoint, _ = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    saved = tmp_path / "checkpoint.json"
    saved.write_text(json.dumps(checkpoint.document()))
    # The insider edits the last linked run (December's) and November's last, re-hashing
    # from link 6 on so that the chain holds together again.
    last = last_link(lease)
    for index in (last, last + 1):
        run = ProbeRun.objects.get(lease=lease, chain_index=index)
        if index == last:
            run.measured_bps = 97 * 10**9
        run.prev_hash = ProbeRun.objects.get(lease=lease, chain_index=index - 1).run_hash
        run.run_hash = link_hash(run_content(run), run.prev_hash)
        run.save()
    ChainCheckpoint.objects.all().delete()
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    new = ProbeRun.objects.get(lease=lease, chain_index=last).run_hash
    code, out = verify_cli(tmp_path, doc, "--previous", str(saved))
    assert code == 1
    assert (
        f"MISMATCH: the checkpoint of 2026-11 names link {last} with hash "
        f"{checkpoint.head_hash[:8]}…; this bundle's link {last} has hash {new[:8]}…: the "
        "chain was rewritten after it was signed"
    ) in out


def test_an_earlier_bundle_is_a_previous_file_too(lease, tmp_path):
    earlier = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    saved = tmp_path / "earlier.json"
    saved.write_text(json.dumps(earlier))
    last = last_link(lease)
    ProbeRun.objects.filter(lease=lease, chain_index__gte=last).delete()
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    code, out = verify_cli(tmp_path, doc, "--previous", str(saved))
    assert code == 1
    assert f"MISMATCH: the earlier bundle of 2026-11 names link {last} with hash" in out
    assert f"this bundle's chain ends at link {last - 1}: links were removed" in out


def test_the_bundles_head_must_be_its_last_link(lease):
    doc = audit.signed_bundle(lease=lease, period=NOVEMBER, now=CLOSE)
    last = last_link(lease)
    doc["bundle"]["chain"]["head"] = {"index": last - 1, "hash": "0" * 64}
    mismatches = audit.verify(audit.sign_bundle(doc["bundle"]), audit.published_key_info())
    assert f"the bundle's chain head is link {last - 1}, yet it carries link {last}" in mismatches


def test_the_sla_page_lists_checkpoints_with_a_download_link(lease, client):
    from tests.factories import StaffFactory

    checkpoint, _ = checkpoints.create_checkpoint(lease=lease, period=NOVEMBER, now=CLOSE)
    client.force_login(StaffFactory())
    page = client.get(reverse("portal:lease-sla", kwargs={"pk": lease.pk}))
    assert page.status_code == 200
    html = page.content.decode()
    assert f"<code>{checkpoint.head_hash[:16]}…</code>" in html
    assert f"/leases/{lease.pk}/checkpoint.json?period=2026-11" in html

# ruff: noqa: F811 (pytest fixtures imported from tests/billing/test_notifications.py)
"""Usage and spend thresholds through the real path: counter readings parsed as the probe
parses them, ``ingest_all`` committing the traffic samples, the evaluation task on commit
(Celery eager), ``billing.running``'s month-to-date figures, the crossing row, the e-mail
(Django's locmem outbox) and the signed webhook to a real HTTP server on 127.0.0.1,
verified with the receiver's helper. Every figure is worked by hand in the comments.

Per GB at ¥0.50: 149.99 GB is ¥74.995, shown ¥75.00 (the usage line rounds half-up to the
fen); 199.98 GB is ¥99.99; 199.99 GB is ¥99.995, shown ¥100.00: a ¥100.00 spend threshold
is reached by the sample that brings 199.99 GB, since the figures are what the invoice would
show."""

import json
import threading
import time
from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import translation
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import thresholds
from billing.ingest import ingest_all
from billing.models import Threshold, ThresholdCrossing
from billing.tasks import evaluate_thresholds, notify_threshold
from config.celery import app as celery_app
from gpulease_verify import webhooks
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.billing.test_notifications import (  # noqa: F401 (fixtures)
    SECRET,
    _receiver_on_loopback_allowed,
    endpoint,
)
from tests.billing.test_traffic_intervals import FIRST_COUNTER, reading
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    TenantFactory,
    at,
    make_lease,
)

GB = 10**9
NOW = at("2026-11-20 12:00")


@pytest.fixture
def eager():
    """Tasks sent on commit run at once, in this process, as a worker would run them."""
    saved = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = saved


def tenant_with(endpoint):  # type: ignore[no-untyped-def]
    return TenantFactory(
        slug="zhiyuan",
        name="Zhiyuan",
        contact_email="billing@zhiyuan.example.cn",
        webhook_url=endpoint.url,
        webhook_secret=SECRET,
        time_zone="Asia/Shanghai",
    )


def usage_lease(tenant, reference="ZY-GB-1", **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=tenant,
        reference=reference,
        starts_at=at("2026-10-01 00:00"),
        nodes=[NodeFactory()],
        **terms,
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01 00:00"))


def per_gb(tenant, reference="ZY-GB-1"):  # type: ignore[no-untyped-def]
    return usage_lease(tenant, reference, billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))


def threshold(tenant, kind, value, lease=None):  # type: ignore[no-untyped-def]
    admin = MembershipFactory(tenant=tenant, role=Role.ADMIN).user
    return thresholds.create_threshold(
        tenant=tenant, user=admin, kind=kind, value=D(value), lease=lease
    )


class Meter:
    """One node's tx counter, read every 5 minutes: ``send(gb)`` reads it at the next
    slot after the bytes went out, and ingest runs on commit as the beat would."""

    def __init__(self, lease, first):  # type: ignore[no-untyped-def]
        self.lease, self.slot, self.counter = lease, first, FIRST_COUNTER
        reading(lease, "n1", self.slot, self.counter)

    def send(self, bytes_sent: int, capture) -> None:  # type: ignore[no-untyped-def]
        self.slot += timedelta(minutes=5)
        self.counter += bytes_sent
        reading(self.lease, "n1", self.slot, self.counter)
        with capture(execute=True):
            ingest_all()


def told(endpoint, mailoutbox):  # type: ignore[no-untyped-def]
    """(webhook documents, e-mail subjects) so far, each webhook verified as a receiver
    verifies it (its own signature, within the tolerance of its timestamp)."""
    documents = []
    for request in endpoint.requests:
        stamp = float(request.headers["webhook-timestamp"])
        webhooks.verify(secret=SECRET, body=request.body, headers=request.headers, now=stamp)
        documents.append(json.loads(request.body))
    return documents, [message.subject for message in mailoutbox]


# --- the rule at the line ------------------------------------------------------------------


@pytest.mark.django_db
def test_per_gb_the_sample_at_the_line_counts_and_spend_is_the_invoices_rounded_figure(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        spend = threshold(tenant, "spend_cny", "100.00")  # all leases together
        usage = threshold(tenant, "usage_gb", "150", lease=lease)
        meter = Meter(lease, at("2026-11-20 10:00"))

        meter.send(149_990_000_000, capture)  # 149.99 GB, ¥74.995 -> ¥75.00: nothing
        assert told(endpoint, mailoutbox) == ([], [])
        meter.send(10_000_000, capture)  # 150.00 GB exactly: the usage line is reached
        documents, subjects = told(endpoint, mailoutbox)
        assert subjects == ["[gpulease] Threshold reached: traffic so far (GB) 150.00 GB (2026-11)"]
        [document] = documents
        assert document["event"] == "threshold.crossed"
        assert document["threshold"] == {
            "id": usage.pk,
            "kind": "usage_gb",
            "value": "150.00",
            "unit": "GB",
            "lease": "ZY-GB-1",
        }
        assert (document["period"], document["figure"]) == ("2026-11", "150.000000")
        # The newest sample: the slot 10:05 (Shanghai) = 02:05 UTC, that brought 0.01 GB.
        assert document["sample_at"] == "2026-11-20T02:05:00Z"
        [figures] = document["leases"]
        assert figures["lease"] == "ZY-GB-1"
        assert (figures["usage"]["amount_so_far"], figures["usage"]["parts"][0]["quantity"]) == (
            "75.00",
            "150.000000",
        )
        assert endpoint.requests[0].headers["X-Gpulease-Event"] == "threshold.crossed"

        meter.send(49_980_000_000, capture)  # 199.98 GB, ¥99.99: spend not reached yet
        assert len(endpoint.requests) == len(mailoutbox) == 1
        meter.send(10_000_000, capture)  # 199.99 GB, ¥99.995 -> ¥100.00: reached
        documents, subjects = told(endpoint, mailoutbox)
        assert subjects[1] == (
            "[gpulease] Threshold reached: spend so far (CNY) 100.00 CNY (2026-11)"
        )
        assert (documents[1]["threshold"]["id"], documents[1]["threshold"]["lease"]) == (
            spend.pk,
            None,
        )
        assert (documents[1]["figure"], documents[1]["sample_at"]) == (
            "100.00",
            "2026-11-20T02:15:00Z",
        )
        body = mailoutbox[1].body
        assert "The leases of Zhiyuan together have reached a threshold" in body
        assert "Figure so far: 100.00 CNY" in body
        assert "Newest traffic sample: 2026-11-20 10:15 (Asia/Shanghai)" in body
        # NOW is 19.5 of November's 30 days: 100.00 x 30 / 19.5 = 153.846... -> ¥153.85.
        assert "Lease ZY-GB-1: ¥100.00 so far, ¥153.85 projected for the month" in body
        assert mailoutbox[1].to == ["billing@zhiyuan.example.cn"]

        meter.send(100 * GB, capture)  # far over both lines: each was told this month
        assert len(endpoint.requests) == len(mailoutbox) == 2
        crossings = ThresholdCrossing.objects.order_by("pk")
        assert [(c.threshold_id, c.period, c.figure, c.value) for c in crossings] == [
            (usage.pk, "2026-11", D("150.000000"), D("150.00")),
            (spend.pk, "2026-11", D("100.000000"), D("100.00")),
        ]
        assert all(c.emailed_at and c.webhook_sent_at for c in crossings)


@pytest.mark.django_db
def test_the_running_95th_reaching_its_line(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    """300, 300, then 500 Mbit/s: under 20 samples nothing is dropped, so the running 95th
    is the highest so far, 500.00 = the line. 500 Mbit/s x 300 s / 8 = 18.75 GB."""
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = usage_lease(
            tenant, "ZY-P95-1", billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000")
        )
        line = threshold(tenant, "p95_mbps", "500", lease=lease)
        meter = Meter(lease, at("2026-11-20 10:00"))
        meter.send(11_250_000_000, capture)
        meter.send(11_250_000_000, capture)
        assert told(endpoint, mailoutbox) == ([], [])
        meter.send(18_750_000_000, capture)
        [document], [subject] = told(endpoint, mailoutbox)
        assert (document["threshold"]["id"], document["figure"]) == (line.pk, "500.00")
        assert document["leases"][0]["usage"]["parts"][0]["p95_bps"] == "500000000"
        assert subject.endswith("500.00 Mbit/s (2026-11)")


# --- once per threshold and period --------------------------------------------------------


@pytest.mark.django_db
def test_the_month_boundary_on_the_tenants_clock(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    """The 30 Nov 23:55 (+08:00) sample brings 100 GB: November's, although ingest reads it
    after midnight. The first December sample over the line is told again, for December."""
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(at("2026-12-01 00:12"), tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        line = threshold(tenant, "usage_gb", "100", lease=lease)
        meter = Meter(lease, at("2026-11-30 23:50"))
        meter.send(0, capture)  # 23:50: nothing sent
        meter.send(100 * GB, capture)  # the slot 23:55, read at 00:00
        documents, _subjects = told(endpoint, mailoutbox)
        assert [(d["period"], d["sample_at"]) for d in documents] == [
            ("2026-11", "2026-11-30T15:55:00Z")
        ]
        meter.send(99 * GB, capture)  # December's slot 00:00: 99 GB, under the line
        assert len(endpoint.requests) == 1
        meter.send(1 * GB, capture)  # 00:05: December reaches 100 GB
        documents, subjects = told(endpoint, mailoutbox)
        assert [(d["period"], d["figure"], d["sample_at"]) for d in documents] == [
            ("2026-11", "100.000000", "2026-11-30T15:55:00Z"),
            ("2026-12", "100.000000", "2026-11-30T16:05:00Z"),
        ]
        assert len(subjects) == 2

        # A second delivery of either task (a redelivered message, the next beat) sends
        # nothing: the crossings are recorded and each channel is marked as delivered.
        assert evaluate_thresholds.apply(args=[lease.pk, ["2026-11", "2026-12"]]).get() == []
        for crossing in ThresholdCrossing.objects.all():
            assert notify_threshold.apply(args=[crossing.pk]).get() == []
        assert len(endpoint.requests) == len(mailoutbox) == 2
        assert set(line.crossings.values_list("period", flat=True)) == {"2026-11", "2026-12"}


@pytest.mark.django_db
def test_a_threshold_added_when_already_reached_is_told_once_at_the_next_ingest(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        meter = Meter(lease, at("2026-11-20 10:00"))
        meter.send(300 * GB, capture)  # ¥150.00, and no threshold yet
        added = threshold(tenant, "spend_cny", "120.50", lease=lease)
        assert told(endpoint, mailoutbox) == ([], [])  # adding it sends nothing by itself
        meter.send(2 * GB, capture)  # 302 GB, ¥151.00
        documents, subjects = told(endpoint, mailoutbox)
        assert [(d["threshold"]["id"], d["figure"]) for d in documents] == [(added.pk, "151.00")]
        assert subjects == ["[gpulease] Threshold reached: spend so far (CNY) 120.50 CNY (2026-11)"]
        meter.send(2 * GB, capture)
        assert len(endpoint.requests) == len(mailoutbox) == 1


@pytest.mark.django_db
def test_the_email_in_chinese(endpoint, mailoutbox, eager, django_capture_on_commit_callbacks):
    """10 GB at ¥0.50 = ¥5.00 so far; 5.00 x 30 / 19.5 = 7.692... -> ¥7.69 for the month."""
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(NOW, tick=False), translation.override("zh-hans"):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        threshold(tenant, "usage_gb", "10", lease=lease)
        Meter(lease, at("2026-11-20 10:00")).send(10 * GB, capture)
    [mail] = mailoutbox
    assert mail.subject == "[gpulease] 已达到阈值：截至目前的流量（GB） 10.00 GB（2026-11）"  # noqa: RUF001
    assert "Zhiyuan 的租约 ZY-GB-1 已达到您为 2026-11 设置的阈值。" in mail.body
    assert "截至目前的数值: 10.000000 GB" in mail.body
    assert "租约 ZY-GB-1：截至目前 ¥5.00, 全月预计 ¥7.69" in mail.body  # noqa: RUF001


@pytest.mark.django_db
def test_a_switched_off_threshold_is_not_evaluated(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        line = threshold(tenant, "usage_gb", "1", lease=lease)
        Threshold.objects.filter(pk=line.pk).update(enabled=False)
        meter = Meter(lease, at("2026-11-20 10:00"))
        with capture(execute=False) as callbacks:
            meter.slot += timedelta(minutes=5)
            meter.counter += 5 * GB
            reading(lease, "n1", meter.slot, meter.counter)
            ingest_all()
        assert callbacks == []  # no evaluation task is even sent
        assert ThresholdCrossing.objects.count() == 0


@pytest.mark.django_db
def test_a_failed_webhook_is_retried_alone_and_the_email_is_not_sent_twice(
    endpoint, mailoutbox, eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    endpoint.statuses = [500, 502]
    # As a worker runs it: a failure is retried (eagerly here), not raised to the caller.
    celery_app.conf.task_eager_propagates = False
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        threshold(tenant, "usage_gb", "10", lease=lease)
        meter = Meter(lease, at("2026-11-20 10:00"))
        meter.send(10 * GB, capture)
    assert len(endpoint.requests) == 3  # two refused, the third taken
    assert len({r.headers["webhook-id"] for r in endpoint.requests}) == 1
    assert len(mailoutbox) == 1
    crossing = ThresholdCrossing.objects.get()
    assert crossing.emailed_at is not None and crossing.webhook_sent_at is not None


@pytest.mark.django_db(transaction=True)
def test_two_evaluations_racing_record_one_crossing_and_tell_once(endpoint, mailoutbox, eager):
    """Two transactions find the same figure over the line: the second insert waits on the
    unique constraint until the first commits, then is refused; only the first tells."""
    with time_machine.travel(NOW, tick=False):
        tenant = tenant_with(endpoint)
        lease = per_gb(tenant)
        line = threshold(tenant, "usage_gb", "10", lease=lease)
        meter = Meter(lease, at("2026-11-20 10:00"))
        meter.slot += timedelta(minutes=5)
        reading(lease, "n1", meter.slot, meter.counter + 10 * GB)
        ingest_all(notify=False)
        found = thresholds.figures(leases=[lease], period="2026-11", instant=NOW)
        assert found.usage_gb == D("10.000000")
        inserted, release, results = threading.Event(), threading.Event(), {}

        def first() -> None:
            try:
                with transaction.atomic():
                    results["first"] = thresholds.record(
                        threshold=line, period="2026-11", figure=found.usage_gb, found=found
                    )
                    inserted.set()
                    release.wait(10)
            finally:
                connection.close()

        def second() -> None:
            inserted.wait(10)
            try:
                results["second"] = thresholds.record(
                    threshold=line, period="2026-11", figure=found.usage_gb, found=found
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        inserted.wait(10)
        time.sleep(0.3)
        assert threads[1].is_alive()  # waiting on the first transaction's row
        release.set()
        for thread in threads:
            thread.join(10)
    assert results["first"] is not None and results["second"] is None
    assert ThresholdCrossing.objects.count() == 1
    assert len(endpoint.requests) == len(mailoutbox) == 1


# --- the API --------------------------------------------------------------------------------


def api_as(user):  # type: ignore[no-untyped-def]
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_api_tenant_admins_write_viewers_read_staff_are_refused():
    tenant = TenantFactory(slug="zhiyuan")
    lease = per_gb(tenant)
    p95 = usage_lease(tenant, "ZY-P95", billing_mode=BillingMode.P95, price_per_mbps_p95=D("1"))
    monthly = make_lease(tenant=tenant, reference="ZY-M")
    admin = MembershipFactory(tenant=tenant, role=Role.ADMIN).user
    viewer = MembershipFactory(tenant=tenant, role=Role.VIEWER).user
    other = MembershipFactory(role=Role.ADMIN).user
    body = {"tenant": "zhiyuan", "kind": "usage_gb", "value": "150", "lease": lease.pk}

    created = api_as(admin).post("/api/v1/thresholds/", body, format="json")
    assert created.status_code == 201, created.content
    row = created.json()
    assert (row["value"], row["unit"], row["lease_reference"], row["enabled"]) == (
        "150.00",
        "GB",
        "ZY-GB-1",
        True,
    )
    url = f"/api/v1/thresholds/{row['id']}/"
    assert api_as(viewer).get(url).json()["crossings"] == []
    assert api_as(viewer).post("/api/v1/thresholds/", body, format="json").status_code == 403
    assert api_as(viewer).patch(url, {"value": "1"}, format="json").status_code == 403
    staff = api_as(StaffFactory())
    assert staff.get(url).status_code == 200
    refused = staff.post("/api/v1/thresholds/", body, format="json")
    assert refused.status_code == 403
    assert "Provider staff never act as a tenant user" in refused.json()["error"]["message"]
    assert api_as(other).get(url).status_code == 404
    assert api_as(other).delete(url).status_code == 404

    def refusal(**changes):  # type: ignore[no-untyped-def]
        answer = api_as(admin).post("/api/v1/thresholds/", {**body, **changes}, format="json")
        assert answer.status_code == 400, answer.content
        return answer.json()["error"]["fields"]

    assert "lease" in refusal(kind="p95_mbps")  # a per-GB lease has no 95th line
    assert "lease" in refusal(lease=monthly.pk)  # a monthly plan has no usage figure
    assert "lease" in refusal(lease=other.memberships.get().tenant.pk + 10_000)
    assert "value" in refusal(value="0")
    assert (
        api_as(admin)
        .post("/api/v1/thresholds/", {**body, "kind": "p95_mbps", "lease": p95.pk}, format="json")
        .status_code
        == 201
    )

    changed = api_as(admin).patch(url, {"value": "99.5", "enabled": False}, format="json")
    assert (changed.json()["value"], changed.json()["enabled"]) == ("99.50", False)
    assert api_as(admin).delete(url).status_code == 204
    assert not Threshold.objects.filter(pk=row["id"]).exists()


# --- the portal -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_settings_page_adds_switches_and_deletes_thresholds(client):
    tenant = TenantFactory(slug="zhiyuan")
    lease = per_gb(tenant)
    admin = MembershipFactory(tenant=tenant, role=Role.ADMIN).user
    viewer = MembershipFactory(tenant=tenant, role=Role.VIEWER).user
    stranger = MembershipFactory(role=Role.ADMIN).user
    client.force_login(admin)
    form = {"tenant": "zhiyuan", "action": "threshold-add", "kind": "spend_cny", "value": "100"}
    assert client.post("/settings/", {**form, "lease": str(lease.pk)}).status_code == 200
    page = client.get("/settings/").content.decode()
    added = Threshold.objects.get()
    assert f'id="threshold-{added.pk}"' in page and "ZY-GB-1" in page and "100.00" in page
    wrong = client.post("/settings/", {**form, "kind": "p95_mbps", "lease": str(lease.pk)})
    assert wrong.status_code == 400  # the portal speaks Chinese by default
    assert "租约 ZY-GB-1 的计费方式不含此阈值所监测的数值。" in wrong.content.decode()
    off = {"tenant": "zhiyuan", "threshold": str(added.pk), "action": "threshold-disable"}
    assert client.post("/settings/", off).status_code == 200
    assert Threshold.objects.get().enabled is False

    client.force_login(viewer)
    assert "threshold-add" not in client.get("/settings/").content.decode()
    assert client.post("/settings/", form).status_code == 403
    client.force_login(stranger)
    theirs = stranger.memberships.get().tenant.slug
    gone = {"tenant": theirs, "threshold": str(added.pk), "action": "threshold-delete"}
    assert client.post("/settings/", gone).status_code == 404
    assert Threshold.objects.filter(pk=added.pk).exists()
    client.force_login(admin)
    assert client.post("/settings/", {**gone, "tenant": "zhiyuan"}).status_code == 200
    assert not Threshold.objects.exists()

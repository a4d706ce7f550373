"""The whole product under a pinned clock, at the instants where calendars turn.

Every instant below is a wall-clock moment that once broke, or could break, month
arithmetic: the last and first minute of a month in Asia/Shanghai (16:00 UTC the day
before), New Year in Shanghai and in UTC, 29 February 2028 and 1 March 2027, and the 31st of
31-day months. At each one the demo loads (a day of history and the last 30 minutes of
telemetry, the flap included, which cross the turn), ingest runs, `sla_report` and `bill --dry-run`
answer for this month and the last, the portal's pages render for a customer and for the
provider, and this month's audit bundle verifies.
"""

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from billing import audit
from billing.ingest import ingest_all
from gpulease_verify.periods import Period
from leases import services
from leases.choices import LeaseStatus
from leases.models import Lease
from tests.factories import NodeFactory, TenantFactory, make_lease, make_run

pytestmark = pytest.mark.django_db

INSTANTS = {
    "last-minute-of-november-shanghai": "2026-11-30T15:59:00Z",
    "first-minute-of-december-shanghai": "2026-11-30T16:00:00Z",
    "new-years-eve-last-minute-shanghai": "2026-12-31T15:59:00Z",
    "new-year-shanghai": "2026-12-31T16:00:00Z",
    "new-years-eve-last-minute-utc": "2026-12-31T23:59:00Z",
    "new-year-utc": "2027-01-01T00:00:00Z",
    "29-february-2028-shanghai": "2028-02-28T16:00:00Z",
    "last-minute-of-29-february-2028-shanghai": "2028-02-29T15:59:00Z",
    "1-march-2027-shanghai": "2027-02-28T16:00:00Z",
    "31-january-2027-shanghai": "2027-01-30T16:00:00Z",
    "31-august-2026-midday-shanghai": "2026-08-31T04:00:00Z",
}


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _run(command: str, **options) -> str:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    call_command(command, stdout=out, **options)
    return out.getvalue()


def _client(username: str) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(get_user_model().objects.get(username=username))
    return client


@pytest.mark.parametrize("instant", INSTANTS.values(), ids=INSTANTS.keys())
def test_demo_reports_bills_pages_and_bundle_at(instant):
    now = _instant(instant)
    with time_machine.travel(now, tick=False):
        _run("demo", history_days=1, telemetry_minutes=30)
        lease = Lease.objects.select_related("tenant").get(reference="ZY-2026-001")
        zone = lease.tenant.time_zone
        this_month = Period.containing(now, zone)

        # The demo's dates are whole months around today, on Shanghai's calendar.
        assert lease.starts_at == this_month.shift(-3).start(zone)
        draft = Lease.objects.get(reference="LX-2026-003")
        assert draft.starts_at == this_month.next.start(zone)
        yearly = Lease.objects.get(reference="ZY-2026-002")
        assert yearly.ends_at == this_month.shift(9).start(zone)

        ingest_all()
        for period in (this_month.previous, this_month):
            report = json.loads(
                _run("sla_report", lease=lease.reference, period=str(period), json=True)
            )
            assert report["period"] == str(period)
            assert report["period_start"] == period.start(zone).isoformat()
            assert report["period_end"] == period.end(zone).isoformat()

            invoices = json.loads(_run("bill", period=str(period), dry_run=True, json=True))
            assert invoices, f"bill --dry-run drafted nothing for {period}"
            assert {invoice["period"] for invoice in invoices} == {str(period)}

        bundle = audit.signed_bundle(lease=lease, period=str(this_month))
        assert bundle["bundle"]["period"]["period"] == str(this_month)
        assert audit.verify(bundle, audit.published_key_info()) == []
        # The metered leases' samples, rebuilt by the verifier from the counters runs on
        # both sides of the month's edge (per GB and 95计费).
        for reference in ("LX-2026-001", "LX-2026-002"):
            metered = Lease.objects.get(reference=reference)
            samples = 0
            for period in (this_month.previous, this_month):
                doc = audit.signed_bundle(lease=metered, period=str(period))
                mismatches, _notes = audit.verify_report(doc, audit.published_key_info())
                assert mismatches == [], (reference, period, mismatches)
                samples += len(doc["bundle"]["traffic_samples"])
            assert samples > 0, reference  # the day of history lies in these two months

        customer = _client("zhiyuan-admin")
        for path in (
            "/",
            f"/leases/{lease.pk}/",
            f"/leases/{lease.pk}/?days=365",
            f"/leases/{lease.pk}/sla/",
            "/invoices/",
            "/tokens/",
        ):
            response = customer.get(path)
            assert response.status_code == 200, path
        history = customer.get(f"/leases/{lease.pk}/sla/").content.decode()
        assert str(this_month) in history and str(this_month.previous) in history

        provider = _client("provider")
        for path in (
            "/provider/",
            "/provider/fabrics/",
            "/provider/incidents/",
            "/provider/cost-share/",
            f"/provider/cost-share/?period={this_month.previous}",
        ):
            response = provider.get(path)
            assert response.status_code == 200, path
        assert str(this_month) in provider.get("/provider/cost-share/").content.decode()


# A month boundary in each tenant's zone: Shanghai's falls at 16:00 UTC, UTC's at midnight.
BOUNDARIES = [
    ("Asia/Shanghai", "2026-11-30T16:00:00Z"),
    ("UTC", "2026-12-01T00:00:00Z"),
    ("Asia/Shanghai", "2026-12-31T16:00:00Z"),
    ("UTC", "2027-01-01T00:00:00Z"),
    ("Asia/Shanghai", "2028-02-29T16:00:00Z"),
    ("UTC", "2028-03-01T00:00:00Z"),
]


@pytest.mark.parametrize(("zone", "boundary"), BOUNDARIES)
def test_a_sample_lands_in_the_month_of_its_instant_in_the_tenants_zone(zone, boundary):
    """Two tenants side by side, one in Shanghai and one in UTC: a failed link check in the
    last hour before one tenant's month turns and a passed one in the first hour after are
    counted in that tenant's own months, whatever the other tenant's calendar says."""
    turn = _instant(boundary)
    before, after = (
        Period.containing(turn - timedelta(minutes=1), zone),
        Period.containing(turn, zone),
    )
    assert after == before.next
    other_zone = "UTC" if zone == "Asia/Shanghai" else "Asia/Shanghai"
    leases = {
        name: make_lease(tenant=TenantFactory(time_zone=name), starts_at=turn - timedelta(days=40))
        for name in (zone, other_zone)
    }
    for lease in leases.values():
        make_run(lease, kind="link", slot=turn - timedelta(minutes=30), verdict="fail")
        make_run(lease, kind="link", slot=turn + timedelta(minutes=30), verdict="pass")
    with time_machine.travel(turn + timedelta(hours=2), tick=False):
        ingest_all(notify=False)
        for name, lease in leases.items():
            lease.refresh_from_db()
            for period in (before, after):
                report = json.loads(
                    _run("sla_report", lease=lease.reference, period=str(period), json=True)
                )
                link = report["link"]
                counted = (link["passed"], link["failed"])
                fail_month = Period.containing(turn - timedelta(minutes=30), name)
                pass_month = Period.containing(turn + timedelta(minutes=30), name)
                expected = (int(pass_month == period), int(fail_month == period))
                assert counted == expected, (name, str(period))
    # The boundary splits the two samples for this tenant; for the other tenant the two
    # instants are 8 hours from its own month's turn, so both fall in one month.
    assert Period.containing(turn - timedelta(minutes=30), zone) == before
    assert Period.containing(turn + timedelta(minutes=30), zone) == after
    assert Period.containing(turn - timedelta(minutes=30), other_zone) == Period.containing(
        turn + timedelta(minutes=30), other_zone
    )


def test_the_month_end_task_drafts_each_tenant_in_its_own_zone():
    """At 00:30 UTC on 1 December, Shanghai's November has ended (at 16:00 UTC) and so has
    UTC's (at midnight): both get a November draft. At 20:30 UTC on 30 November only
    Shanghai's has."""
    from billing.models import Invoice
    from billing.tasks import draft_previous_month

    shanghai = make_lease(
        tenant=TenantFactory(time_zone="Asia/Shanghai"),
        starts_at=datetime(2026, 10, 31, 16, tzinfo=UTC),  # 1 November, Shanghai
        nodes=[NodeFactory()],
    )
    utc = make_lease(
        tenant=TenantFactory(time_zone="UTC"),
        starts_at=datetime(2026, 11, 1, tzinfo=UTC),
        nodes=[NodeFactory()],
    )
    for lease in (shanghai, utc):
        services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=lease.starts_at)
    with time_machine.travel(datetime(2026, 11, 30, 20, 30, tzinfo=UTC), tick=False):
        draft_previous_month()
    assert set(Invoice.objects.values_list("tenant__time_zone", "period")) == {
        ("Asia/Shanghai", "2026-11")
    }
    with time_machine.travel(datetime(2026, 12, 1, 0, 30, tzinfo=UTC), tick=False):
        draft_previous_month()
    assert set(Invoice.objects.values_list("tenant__time_zone", "period")) == {
        ("Asia/Shanghai", "2026-11"),
        ("UTC", "2026-11"),
    }
    assert shanghai.tenant.invoices.get().period_end == datetime(2026, 11, 30, 16, tzinfo=UTC)
    assert utc.tenant.invoices.get().period_end == datetime(2026, 12, 1, tzinfo=UTC)

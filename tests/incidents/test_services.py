"""The one writer of incidents (incidents.services): what opened and what closed each
incident, a repeated report that joins the open incident instead of opening a second, and
a close that happens once however often it is asked for."""

from datetime import UTC, datetime, timedelta

import pytest

from benchmarks import witness
from incidents import services
from incidents.choices import FabricIncidentKind, IncidentState
from incidents.models import Incident
from tests.factories import make_lease, make_run

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 10, 8, tzinfo=UTC)


@pytest.fixture
def lease():
    return make_lease(reference="LAB-1")


def test_the_witness_opens_one_integrity_incident_per_node_and_a_person_resolves_it(lease):
    terms = lease.terms.first()
    first = witness.open_dispute(
        lease_id=lease.pk, node="n1", terms_id=terms.pk, at=T0, rule="witness", detail="a"
    )
    run = make_run(lease, target="n1>n2", slot=T0 + timedelta(hours=1))
    second = witness.open_dispute(
        lease_id=lease.pk,
        node="n1",
        terms_id=terms.pk,
        at=T0 + timedelta(hours=1),
        rule="witness",
        detail="b",
        run=run,
    )
    assert second.pk == first.pk and Incident.objects.count() == 1
    second.refresh_from_db()
    # Opened by the witness at the first dispute; the second only adds its run.
    assert (second.source, second.opened_by) == ("witness", "witness")
    assert (second.opened_at, second.violations, second.detail) == (T0, 2, "a")
    assert list(second.runs.values_list("pk", flat=True)) == [run.pk]

    rows = Incident.objects.filter(pk=second.pk)
    assert witness.resolve_integrity_incidents(rows, by="ops-wang") == 1
    assert witness.resolve_integrity_incidents(rows, by="ops-li") == 0  # already resolved
    resolved = rows.get()
    assert resolved.state == IncidentState.CLOSED
    assert (resolved.closed_source, resolved.closed_by) == ("manual", "ops-wang")
    assert resolved.detail.startswith("a\nResolved by ops-wang at ")
    assert "ops-li" not in resolved.detail


def _opened(lease, **extra):  # type: ignore[no-untyped-def]
    return services.open_incident(
        actor=services.TELEMETRY,
        lease_id=lease.pk,
        terms_id=lease.terms.first().pk,
        kind=FabricIncidentKind.TELEMETRY,
        pattern="link_flap",
        target="n1:mlx5_0:1",
        opened_at=T0,
        rule="link_flap v2",
        violations=1,
        **extra,
    )


def test_closing_twice_closes_once_and_notifies_once(lease, django_capture_on_commit_callbacks):
    incident = _opened(lease)
    end = T0 + timedelta(minutes=21)
    with django_capture_on_commit_callbacks() as callbacks:
        assert services.close(incident, at=end, actor=services.TELEMETRY, notify=True)
        later = services.Actor.person("ops-li")
        assert not services.close(
            incident, at=end + timedelta(hours=1), actor=later, note="again", notify=True
        )
    assert len(callbacks) == 1  # one "closed" notification
    incident.refresh_from_db()
    assert (incident.state, incident.closed_at) == ("closed", end)
    assert (incident.closed_source, incident.closed_by, incident.detail) == (
        "telemetry",
        "telemetry",
        "",
    )


def test_a_stale_copy_of_a_closed_incident_does_not_close_it_again(lease):
    incident = _opened(lease)
    stale = Incident.objects.get(pk=incident.pk)
    assert services.close(incident, at=T0 + timedelta(minutes=5), actor=services.TELEMETRY)
    assert not services.close(stale, at=T0 + timedelta(minutes=9), actor=services.INGEST)
    # The stale copy is brought up to date rather than left saying "open".
    assert (stale.state, stale.closed_at) == ("closed", T0 + timedelta(minutes=5))
    assert stale.closed_source == "telemetry"


def test_open_or_extend_joins_the_open_incident_and_a_closed_one_lets_a_new_one_open(lease):
    terms = lease.terms.first()
    key = {
        "lease_id": lease.pk,
        "terms_id": terms.pk,
        "kind": "link",
        "pattern": "alertmanager",
        "target": "NodeInfinibandLinkDown on n1",
        "rule": "Alertmanager alert NodeInfinibandLinkDown",
    }
    first, opened = services.open_or_extend(actor=services.ALERTMANAGER, opened_at=T0, **key)
    again, opened_again = services.open_or_extend(
        actor=services.ALERTMANAGER, opened_at=T0 + timedelta(minutes=3), **key
    )
    assert (opened, opened_again, again.pk) == (True, False, first.pk)
    assert again.opened_at == T0
    assert services.close(first, at=T0 + timedelta(hours=1), actor=services.ALERTMANAGER)
    recurred, opened = services.open_or_extend(
        actor=services.ALERTMANAGER, opened_at=T0 + timedelta(hours=2), **key
    )
    assert opened and recurred.pk != first.pk
    assert Incident.objects.filter(state="open").count() == 1


def test_only_what_a_source_learns_later_can_be_updated(lease):
    incident = _opened(lease)
    assert services.update(incident, detail="more") is True
    assert services.update(incident, detail="more") is False
    with pytest.raises(ValueError, match="not updatable: state"):
        services.update(incident, state="closed")
    assert Incident.objects.get(pk=incident.pk).detail == "more"

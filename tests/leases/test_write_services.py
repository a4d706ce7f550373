"""Writes from the API and the admin go through leases.services: a node assigned or
released on the lease's admin page records the same LeaseEvent the API path records, is
checked by the same rules, and a refusal is a sentence on the page, never a 500. Sites and
fabrics are written through the services from both, checked as the model checks them."""

from typing import Any

import pytest
import time_machine
from django import forms
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from leases import services
from leases.choices import LeaseStatus
from leases.models import Fabric, Lease, LeaseEvent, NodeAssignment, Site
from tests.factories import NodeFactory, StaffFactory, TenantFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOW = at("2026-11-15 12:00")


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def staff():
    return StaffFactory(username="operator")


@pytest.fixture
def admin_client(staff):
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(staff)
    return client


@pytest.fixture
def api(staff):
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_authenticate(staff)
    return client


@pytest.fixture
def lease():
    """An active lease from 1 November with one node, open-ended."""
    lease = make_lease(reference="ZY-7", starts_at=at("2026-11-01 00:00"), nodes=[NodeFactory()])
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01 00:00"))


def _change_url(lease: Lease) -> str:
    return reverse("admin:leases_lease_change", args=[lease.pk])


def _form_data(form: forms.BaseForm) -> dict[str, Any]:
    """What the browser posts back for a form as the page shows it."""
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        if field.disabled:
            continue
        bound = form[name]
        value = bound.value()
        if isinstance(field.widget, forms.MultiWidget):
            parts = field.widget.decompress(value) if value else [None, None]
            for index, part in enumerate(parts):
                data[f"{bound.html_name}_{index}"] = "" if part is None else str(part)
        elif isinstance(value, bool):
            if value:
                data[bound.html_name] = "on"
        else:
            data[bound.html_name] = "" if value is None else str(value)
    return data


def _page_data(client, lease: Lease) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The lease's change page as posted back unchanged."""
    page = client.get(_change_url(lease))
    assert page.status_code == 200
    data = _form_data(page.context["adminform"].form)
    for inline in page.context["inline_admin_formsets"]:
        data |= _form_data(inline.formset.management_form)
        for form in inline.formset.forms:
            data |= _form_data(form)
    return data


def _add_row(data: dict[str, Any], node, start: str, end: str = "") -> dict[str, Any]:  # type: ignore[no-untyped-def]
    index = int(data["assignments-TOTAL_FORMS"])
    data["assignments-TOTAL_FORMS"] = str(index + 1)
    start_date, start_time = start.split()
    end_date, end_time = end.split() if end else ("", "")
    data |= {
        f"assignments-{index}-node": str(node.pk),
        f"assignments-{index}-assigned_from_0": start_date,
        f"assignments-{index}-assigned_from_1": start_time,
        f"assignments-{index}-assigned_until_0": end_date,
        f"assignments-{index}-assigned_until_1": end_time,
    }
    return data


def _events(lease: Lease, action: str) -> list[LeaseEvent]:
    return list(lease.events.filter(action=action).order_by("id"))


# --- node assignments ---------------------------------------------------------------------


def test_a_node_added_in_the_admin_records_the_event_the_api_records(admin_client, api, staff):
    tenant = TenantFactory(slug="zhiyuan")
    through_api = NodeFactory(hostname="sz-a100-01")
    created = api.post(
        "/api/v1/leases/",
        {
            "tenant": "zhiyuan",
            "reference": "ZY-8",
            "starts_at": "2026-11-20T00:00:00+08:00",
            "terms": {
                "contracted_bandwidth_gbps": "100",
                "technology": "roce",
                "billing_mode": "monthly",
                "node_rent_per_month": "45000.00",
                "network_fee_per_month": "6000.00",
            },
            "nodes": [through_api.pk],
        },
        format="json",
    )
    assert created.status_code == 201, created.content[:300]
    (api_event,) = _events(Lease.objects.get(reference="ZY-8"), LeaseEvent.Action.NODE_ASSIGNED)

    lease = make_lease(tenant=tenant, reference="ZY-9", starts_at=at("2026-11-01 00:00"))
    through_admin = NodeFactory(hostname="sz-a100-02")
    data = _add_row(_page_data(admin_client, lease), through_admin, "2026-11-20 00:00:00")
    response = admin_client.post(_change_url(lease), data, follow=True)
    assert response.status_code == 200
    assert "was changed successfully" in response.content.decode()
    (admin_event,) = _events(lease, LeaseEvent.Action.NODE_ASSIGNED)

    # The same event, with who did it, the node and the period (in UTC, whichever zone the
    # request was written in); both open-ended.
    assert (api_event.actor, admin_event.actor) == (staff, staff)
    assert api_event.detail == {
        "node": "sz-a100-01",
        "start": "2026-11-19T16:00:00+00:00",
        "end": None,
    }
    assert admin_event.detail == {
        "node": "sz-a100-02",
        "start": "2026-11-19T16:00:00+00:00",
        "end": None,
    }
    assert lease.assignments.get().node == through_admin


def test_ending_a_node_early_in_the_admin_records_its_release(admin_client, lease, staff):
    assignment = lease.assignments.get()
    data = _page_data(admin_client, lease)
    data |= {
        "assignments-0-assigned_until_0": "2026-11-10",
        "assignments-0-assigned_until_1": "08:00:00",
    }
    response = admin_client.post(_change_url(lease), data, follow=True)
    assert "was changed successfully" in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.assigned_until == at("2026-11-10 08:00")
    (event,) = _events(lease, LeaseEvent.Action.NODE_RELEASED)
    assert event.actor == staff
    assert event.detail == {
        "node": assignment.node.hostname,
        "at": "2026-11-10T00:00:00+00:00",
    }
    # The node left the lease before now: it is free again.
    assignment.node.refresh_from_db()
    assert assignment.node.status == "available"


def test_a_node_another_lease_holds_is_refused_on_the_page(admin_client, lease):
    held = lease.assignments.get().node
    other = make_lease(tenant=lease.tenant, reference="ZY-10", starts_at=at("2026-11-01 00:00"))
    data = _add_row(_page_data(admin_client, other), held, "2026-11-20 00:00:00")
    response = admin_client.post(_change_url(other), data)
    assert response.status_code == 200
    assert (
        f"Node {held.hostname} is already leased from 2026-11-01 00:00 to further notice "
        "under lease ZY-7."
    ) in response.content.decode()
    assert not other.assignments.exists()
    assert not _events(other, LeaseEvent.Action.NODE_ASSIGNED)


def test_a_node_before_the_lease_starts_and_a_longer_stay_are_refused(admin_client, lease):
    data = _add_row(
        _page_data(admin_client, lease), NodeFactory(hostname="n-early"), "2026-10-20 00:00:00"
    )
    response = admin_client.post(_change_url(lease), data)
    assert response.status_code == 200
    assert (
        "Node n-early cannot join lease ZY-7 before the lease starts (2026-11-01 00:00)."
        in response.content.decode()
    )
    # An open-ended row cannot be "released" later than it ends: a longer stay is a new row.
    services.release_node(assignment=lease.assignments.get(), at=at("2026-11-30 00:00"))
    data = _page_data(admin_client, lease)
    data |= {
        "assignments-0-assigned_until_0": "2026-12-15",
        "assignments-0-assigned_until_1": "00:00:00",
    }
    response = admin_client.post(_change_url(lease), data)
    assert response.status_code == 200
    assert "This assignment already ends before that instant." in response.content.decode()
    assert lease.assignments.get().assigned_until == at("2026-11-30 00:00")
    assert len(_events(lease, LeaseEvent.Action.NODE_ASSIGNED)) == 1  # the lease's first node


def test_an_ended_lease_takes_no_new_node_from_the_admin(admin_client, lease):
    services.transition_lease(lease=lease, to=LeaseStatus.ENDED)
    data = _add_row(
        _page_data(admin_client, lease), NodeFactory(), "2026-11-10 00:00:00", "2026-11-12 00:00:00"
    )
    response = admin_client.post(_change_url(lease), data)
    assert response.status_code == 200
    assert "Lease ZY-7 is ended; nodes can no longer be added." in response.content.decode()
    assert lease.assignments.count() == 1


def test_assignments_are_history_in_the_admin(admin_client, lease):
    page = admin_client.get(_change_url(lease))
    (inline,) = [
        i for i in page.context["inline_admin_formsets"] if i.formset.model is NodeAssignment
    ]
    assert inline.formset.can_delete is False
    (row,) = inline.formset.initial_forms
    assert row.fields["node"].disabled and row.fields["assigned_from"].disabled
    assert not row.fields["assigned_until"].disabled


# --- sites and fabrics ---------------------------------------------------------------------


def test_sites_and_fabrics_are_written_through_the_services_from_the_api(api):
    created = api.post(
        "/api/v1/sites/", {"name": "Foshan DC", "code": "fs1", "city": "Foshan"}, format="json"
    )
    assert created.status_code == 201
    assert created.json()["region"] == "Guangdong"
    site = Site.objects.get(code="fs1")
    fabric = api.post(
        "/api/v1/fabrics/",
        {
            "site": "fs1",
            "name": "roce-200g",
            "technology": "roce",
            "port_speed_gbps": 200,
            "topology": "leaf_spine",
            "oversubscription": "1.50",
        },
        format="json",
    )
    assert fabric.status_code == 201
    pk = fabric.json()["id"]
    refused = api.patch(f"/api/v1/fabrics/{pk}/", {"oversubscription": "0.50"}, format="json")
    assert refused.status_code == 400
    assert "cannot be below 1:1" in refused.json()["error"]["message"]
    changed = api.patch(f"/api/v1/fabrics/{pk}/", {"oversubscription": "3"}, format="json")
    assert changed.status_code == 200 and changed.json()["oversubscription"] == "3.00"
    assert Fabric.objects.get(pk=pk).oversubscription_label == "3:1"
    renamed = api.patch(f"/api/v1/sites/{site.pk}/", {"city": "佛山"}, format="json")
    assert renamed.status_code == 200
    site.refresh_from_db()
    assert (site.city, site.name) == ("佛山", "Foshan DC")


def test_sites_and_fabrics_are_written_through_the_services_from_the_admin(admin_client):
    response = admin_client.post(
        reverse("admin:leases_site_add"),
        {"name": "Zhuhai DC", "code": "zh1", "city": "Zhuhai", "region": "Guangdong"},
        follow=True,
    )
    assert response.status_code == 200
    site = Site.objects.get(code="zh1")
    fabric_form = {
        "site": site.pk,
        "name": "ib-400g",
        "technology": "infiniband",
        "port_speed_gbps": "400",
        "topology": "fat_tree",
        "oversubscription": "0.5",
        "switches-TOTAL_FORMS": "1",
        "switches-INITIAL_FORMS": "0",
        "switches-MIN_NUM_FORMS": "0",
        "switches-MAX_NUM_FORMS": "1000",
        "switches-0-name": "leaf1",
        "switches-0-role": "leaf",
        "switches-0-snmp_port": "161",  # the form's initial value, as a browser sends it
    }
    refused = admin_client.post(reverse("admin:leases_fabric_add"), fabric_form)
    assert refused.status_code == 200
    assert "The oversubscription ratio cannot be below 1:1" in refused.content.decode()
    fabric_form["oversubscription"] = "1"
    admin_client.post(reverse("admin:leases_fabric_add"), fabric_form, follow=True)
    fabric = Fabric.objects.get(site=site, name="ib-400g")
    assert list(fabric.switches.values_list("name", flat=True)) == ["leaf1"]
    response = admin_client.post(
        reverse("admin:leases_site_change", args=[site.pk]),
        {"name": "Zhuhai DC", "code": "zh1", "city": "珠海", "region": "Guangdong"},
        follow=True,
    )
    assert response.status_code == 200
    site.refresh_from_db()
    assert site.city == "珠海"

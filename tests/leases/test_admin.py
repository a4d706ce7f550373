"""The provider admin portal: every page renders for staff, actions work, and refusals
read as sentences an operator understands."""

import json
from datetime import timedelta

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from leases.choices import LeaseStatus
from leases.demo import load_demo
from leases.models import Lease, LeaseTerms, Node, TermsAmendment
from tests.factories import StaffFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    load_demo()
    client.force_login(StaffFactory())
    return client


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_changelist_renders_with_search_and_filters(staff_client):
    for model, model_admin in admin.site._registry.items():
        url = _url(model, "changelist")
        assert staff_client.get(url).status_code == 200, url
        if model_admin.search_fields:
            assert staff_client.get(url, {"q": "a"}).status_code == 200, url
        response = staff_client.get(url)
        for spec in response.context["cl"].filter_specs:
            for choice in list(spec.choices(response.context["cl"]))[:3]:
                query = choice["query_string"]
                assert staff_client.get(url + query).status_code == 200, (url, query)


def test_every_change_and_add_page_renders(staff_client):
    for model, model_admin in admin.site._registry.items():
        obj = model._default_manager.first()
        if obj is not None:
            url = _url(model, "change", obj.pk)
            assert staff_client.get(url).status_code == 200, url
        request = staff_client.get("/").wsgi_request
        request.user = staff_client.get(_url(model, "changelist")).wsgi_request.user
        if model_admin.has_add_permission(request):
            url = _url(model, "add")
            assert staff_client.get(url).status_code == 200, url


def test_admin_speaks_simplified_chinese(staff_client):
    response = staff_client.get(_url(Lease, "changelist"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    text = response.content.decode()
    assert "租用" in text
    response = staff_client.get(_url(Node, "changelist"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "节点" in response.content.decode()


def test_lease_actions_move_leases_through_their_life(staff_client):
    draft = Lease.objects.get(reference="LX-2026-003")
    changelist = _url(Lease, "changelist")
    response = staff_client.post(
        changelist,
        {"action": "activate", "_selected_action": [draft.pk]},
        follow=True,
        HTTP_ACCEPT_LANGUAGE="en",
    )
    draft.refresh_from_db()
    assert draft.status == LeaseStatus.ACTIVE
    assert "1 lease is now active." in response.content.decode()
    response = staff_client.post(
        changelist,
        {"action": "cancel", "_selected_action": [draft.pk]},
        follow=True,
        HTTP_ACCEPT_LANGUAGE="en",
    )
    draft.refresh_from_db()
    assert draft.status == LeaseStatus.ACTIVE
    assert "Lease LX-2026-003 is active and cannot become cancelled." in response.content.decode()


def test_lease_ending_before_it_starts_is_refused_in_a_sentence(staff_client):
    lease = Lease.objects.get(reference="ZY-2026-001")
    response = staff_client.post(
        _url(Lease, "add"),
        {
            "tenant": lease.tenant_id,
            "reference": "NEW-1",
            "starts_at_0": "2026-12-10",
            "starts_at_1": "00:00:00",
            "ends_at_0": "2026-12-01",
            "ends_at_1": "00:00:00",
            **_empty_inlines(),
        },
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert response.status_code == 200
    assert "A lease must end after it starts." in response.content.decode()
    assert not Lease.objects.filter(reference="NEW-1").exists()


def test_assigning_a_leased_node_is_refused_with_who_holds_it(staff_client):
    holder = Lease.objects.get(reference="ZY-2026-001")
    node = holder.assignments.first().node
    response = staff_client.post(
        _url(Lease, "add"),
        {
            "tenant": holder.tenant_id,
            "reference": "NEW-2",
            "starts_at_0": "2030-01-01",
            "starts_at_1": "00:00:00",
            "ends_at_0": "",
            "ends_at_1": "",
            **_empty_inlines(),
            "assignments-TOTAL_FORMS": "1",
            "assignments-0-node": node.pk,
            "assignments-0-assigned_from_0": "2030-01-01",
            "assignments-0-assigned_from_1": "00:00:00",
        },
        HTTP_ACCEPT_LANGUAGE="en",
    )
    text = response.content.decode()
    assert f"Node {node.hostname} is already leased from " in text
    assert "under lease ZY-2026-001." in text
    assert not Lease.objects.filter(reference="NEW-2").exists()


def test_negative_price_is_refused_on_a_new_terms_version(staff_client):
    lease = Lease.objects.get(reference="LX-2026-002")
    current = lease.terms.get()
    data = {
        field.name: getattr(current, field.name)
        for field in LeaseTerms._meta.concrete_fields
        if field.name
        not in {"id", "version", "created_at", "updated_at", "lease", "effective_from"}
    }
    for name in ("probe_cadence_s", "heavy_probe_windows", "maintenance_windows", "credit_tiers"):
        data[name] = json.dumps(data[name])
    data = {name: "" if value is None else value for name, value in data.items()}
    data.update(
        {
            "lease": lease.pk,
            "effective_from_0": "2031-01-01",
            "effective_from_1": "00:00:00",
            "amendment_reason": "Price change",
            "price_per_mbps_p95": "-0.5",
        }
    )
    response = staff_client.post(_url(LeaseTerms, "add"), data, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 200
    assert "A price cannot be negative." in response.content.decode()
    data["price_per_mbps_p95"] = "0.3500"
    response = staff_client.post(_url(LeaseTerms, "add"), data, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 302, response.content.decode()[:2000]
    amended = lease.terms.get(version=2)
    assert str(amended.price_per_mbps_p95) == "0.3500"
    assert amended.amendment_reason == "Price change"


def _empty_inlines():
    return {
        f"{prefix}-{key}": value
        for prefix in ("assignments", "terms", "events")
        for key, value in (
            ("TOTAL_FORMS", "0"),
            ("INITIAL_FORMS", "0"),
            ("MIN_NUM_FORMS", "0"),
            ("MAX_NUM_FORMS", "1000"),
        )
    }


def test_an_amendment_s_changes_are_checked_by_the_api_s_rules(staff_client):
    # The amendment page's form is the leases app's; the API's rules for `changes` reach it
    # through api.admin (the leases app cannot import the API). `true` is no percentage to
    # the API, though Django's DecimalField would read it as 1.
    lease = Lease.objects.get(reference="LX-2026-002")
    past = timezone.localtime(timezone.now() - timedelta(hours=1))
    data = {
        "lease": lease.pk,
        "effective_from_0": past.strftime("%Y-%m-%d"),
        "effective_from_1": past.strftime("%H:%M:%S"),
        "changes": json.dumps({"sla_threshold_percent": True}),
        "reason": "SLA threshold agreed on the phone",
    }
    response = staff_client.post(_url(TermsAmendment, "add"), data, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 200
    assert "sla_threshold_percent: A valid number is required." in response.content.decode()
    assert not TermsAmendment.objects.filter(lease=lease).exists()

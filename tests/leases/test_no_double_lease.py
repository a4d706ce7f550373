"""A node can never be in two live leases over overlapping time: the services refuse it in
a sentence, and the database refuses it even when the services are bypassed."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from leases import services
from leases.choices import LeaseStatus
from leases.models import NodeAssignment
from tests.factories import NodeFactory, at, make_lease

pytestmark = pytest.mark.django_db


def test_database_refuses_overlapping_assignment_even_without_services():
    node = NodeFactory()
    first = make_lease(
        nodes=[node], starts_at=at("2026-11-01 00:00"), ends_at=at("2026-12-01 00:00")
    )
    second = make_lease(starts_at=at("2026-11-15 00:00"))
    with pytest.raises(IntegrityError, match="node_not_leased_twice"), transaction.atomic():
        NodeAssignment.objects.create(
            lease=second, node=node, assigned_from=at("2026-11-20 00:00"), assigned_until=None
        )
    assert NodeAssignment.objects.filter(node=node).count() == 1
    assert first.assignments.get().node == node


def test_database_refuses_an_update_that_creates_an_overlap():
    node = NodeFactory()
    make_lease(nodes=[node], starts_at=at("2026-11-01 00:00"), ends_at=at("2026-11-10 00:00"))
    later = make_lease(
        nodes=[node], starts_at=at("2026-11-10 00:00"), ends_at=at("2026-11-20 00:00")
    )
    assignment = later.assignments.get()
    assignment.assigned_from = at("2026-11-09 23:00")
    with pytest.raises(IntegrityError), transaction.atomic():
        assignment.save()


def test_back_to_back_assignments_are_allowed():
    # [1 Nov, 10 Nov) and [10 Nov, ...) touch but do not overlap.
    node = NodeFactory()
    make_lease(nodes=[node], starts_at=at("2026-11-01 00:00"), ends_at=at("2026-11-10 00:00"))
    make_lease(nodes=[node], starts_at=at("2026-11-10 00:00"))
    assert NodeAssignment.objects.filter(node=node).count() == 2


def test_service_refusal_names_the_node_the_period_and_the_lease():
    node = NodeFactory(hostname="sz-a100-07")
    make_lease(
        reference="ZY-2026-001",
        nodes=[node],
        starts_at=at("2026-11-01 08:00"),
        ends_at=at("2026-12-01 08:00"),
    )
    other = make_lease(starts_at=at("2026-11-15 00:00"))
    with pytest.raises(ValidationError) as refused:
        services.assign_node(lease=other, node=node)
    assert refused.value.messages == [
        "Node sz-a100-07 is already leased from 2026-11-01 08:00 to 2026-12-01 08:00 "
        "under lease ZY-2026-001."
    ]


def test_an_open_ended_lease_blocks_every_later_period():
    node = NodeFactory()
    make_lease(nodes=[node], starts_at=at("2026-11-01 00:00"), ends_at=None)
    far_future = make_lease(starts_at=at("2030-01-01 00:00"), ends_at=at("2030-02-01 00:00"))
    with pytest.raises(ValidationError, match="to further notice under lease"):
        services.assign_node(lease=far_future, node=node)


def test_a_cancelled_lease_frees_its_nodes():
    node = NodeFactory()
    draft = make_lease(nodes=[node], starts_at=at("2026-11-01 00:00"))
    services.transition_lease(lease=draft, to=LeaseStatus.CANCELLED)
    replacement = make_lease(nodes=[node], starts_at=at("2026-11-01 00:00"))
    assert replacement.assignments.get().node == node
    assert draft.assignments.get().void is True


def test_a_node_swap_keeps_history_and_frees_the_old_node():
    old, new = NodeFactory(hostname="old-node"), NodeFactory(hostname="new-node")
    lease = make_lease(nodes=[old], starts_at=at("2026-11-01 00:00"))
    services.swap_node(lease=lease, old_node=old, new_node=new, at=at("2026-11-16 12:00"))
    history = list(
        lease.assignments.order_by("assigned_from").values_list(
            "node__hostname", "assigned_from", "assigned_until"
        )
    )
    assert history == [
        ("old-node", at("2026-11-01 00:00"), at("2026-11-16 12:00")),
        ("new-node", at("2026-11-16 12:00"), None),
    ]
    # The old node is free from the swap on, so another lease may take it.
    make_lease(nodes=[old], starts_at=at("2026-11-16 12:00"))

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from leases import services
from leases.choices import LeaseStatus, NodeStatus
from leases.models import LeaseEvent
from tests.factories import NodeFactory, StaffFactory, at, make_lease

pytestmark = pytest.mark.django_db


def test_draft_lease_activates_and_its_nodes_become_leased():
    nodes = NodeFactory.create_batch(2)
    lease = make_lease(nodes=nodes, starts_at=at("2026-01-01 00:00"))
    operator = StaffFactory()
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, actor=operator)
    lease.refresh_from_db()
    assert lease.status == LeaseStatus.ACTIVE
    assert {n.status for n in type(nodes[0]).objects.filter(pk__in=[n.pk for n in nodes])} == {
        NodeStatus.LEASED
    }
    event = lease.events.get(action=LeaseEvent.Action.ACTIVATED)
    assert event.actor == operator


def test_a_lease_without_nodes_cannot_be_activated():
    lease = make_lease()
    with pytest.raises(ValidationError, match="has no nodes"):
        services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ([LeaseStatus.ACTIVE], LeaseStatus.DRAFT),
        ([LeaseStatus.ACTIVE], LeaseStatus.CANCELLED),
        ([LeaseStatus.ACTIVE, LeaseStatus.ENDED], LeaseStatus.ACTIVE),
        ([LeaseStatus.CANCELLED], LeaseStatus.ACTIVE),
        ([], LeaseStatus.ENDED),
    ],
)
def test_invalid_transitions_are_refused_in_a_sentence(path, refused):
    lease = make_lease(nodes=[NodeFactory()], starts_at=at("2026-01-01 00:00"), reference="ZY-1")
    for status in path:
        services.transition_lease(lease=lease, to=status)
    lease.refresh_from_db()
    with pytest.raises(ValidationError) as error:
        services.transition_lease(lease=lease, to=refused)
    assert error.value.messages[0].startswith(f"Lease ZY-1 is {lease.get_status_display()}")
    lease.refresh_from_db()
    assert lease.status == (path[-1] if path else LeaseStatus.DRAFT)


def test_ending_a_lease_closes_open_assignments_and_frees_nodes():
    node = NodeFactory()
    lease = make_lease(nodes=[node], starts_at=at("2026-01-01 00:00"))
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    before = timezone.now()
    services.transition_lease(lease=lease, to=LeaseStatus.ENDED)
    lease.refresh_from_db()
    node.refresh_from_db()
    assignment = lease.assignments.get()
    assert lease.status == LeaseStatus.ENDED
    assert before <= lease.ends_at <= timezone.now()
    assert assignment.assigned_until == lease.ends_at
    assert node.status == NodeStatus.AVAILABLE


def test_ending_early_voids_assignments_that_had_not_started():
    early, late = NodeFactory(), NodeFactory()
    lease = make_lease(nodes=[early], starts_at=at("2026-01-01 00:00"))
    services.assign_node(lease=lease, node=late, assigned_from=at("2099-01-01 00:00"))
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    services.transition_lease(lease=lease, to=LeaseStatus.ENDED)
    assert lease.assignments.get(node=late).void is True
    assert lease.assignments.get(node=early).void is False


def test_nodes_cannot_be_added_to_an_ended_lease():
    lease = make_lease(nodes=[NodeFactory()], starts_at=at("2026-01-01 00:00"), reference="ZY-9")
    services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    services.transition_lease(lease=lease, to=LeaseStatus.ENDED)
    with pytest.raises(ValidationError, match="Lease ZY-9 is ended"):
        services.assign_node(lease=lease, node=NodeFactory())

"""Which terms were in force at an instant, across amendments."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from leases import selectors, services
from leases.models import LeaseEvent
from tests.factories import NodeFactory, amend_acknowledged, at, make_lease

pytestmark = pytest.mark.django_db


@pytest.fixture
def amended_lease():
    lease = make_lease(starts_at=at("2026-09-01 00:00"), nodes=NodeFactory.create_batch(2))
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-10-15 00:00"),
        changes={
            "contracted_bandwidth_gbps": Decimal("200"),
            "network_fee_per_month": Decimal("10000.00"),
        },
        reason="Upgrade to 2x100G",
    )
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-01 00:00"),
        changes={"sla_threshold_percent": Decimal("97")},
        reason="Stricter SLA",
    )
    return lease


@pytest.mark.parametrize(
    ("instant", "version", "bandwidth", "fee", "threshold"),
    [
        ("2026-09-01 00:00", 1, "100", "6000.00", "95"),
        ("2026-10-14 23:59", 1, "100", "6000.00", "95"),
        ("2026-10-15 00:00", 2, "200", "10000.00", "95"),  # the instant it takes effect
        ("2026-10-31 23:59", 2, "200", "10000.00", "95"),
        ("2026-11-01 00:00", 3, "200", "10000.00", "97"),  # carries version 2's upgrade
        ("2027-06-01 00:00", 3, "200", "10000.00", "97"),
    ],
)
def test_terms_in_force_at_an_instant(amended_lease, instant, version, bandwidth, fee, threshold):
    terms = selectors.terms_in_force(lease=amended_lease, at=at(instant))
    assert terms is not None
    assert terms.version == version
    assert terms.contracted_bandwidth_gbps == Decimal(bandwidth)
    assert terms.network_fee_per_month == Decimal(fee)
    assert terms.sla_threshold_percent == Decimal(threshold)


def test_no_terms_before_the_lease_starts(amended_lease):
    assert selectors.terms_in_force(lease=amended_lease, at=at("2026-08-31 23:59")) is None


def test_timeline_answers_like_the_query_for_many_instants(
    amended_lease, django_assert_num_queries
):
    instants = [at("2026-08-31 00:00") + timedelta(hours=7 * i) for i in range(400)]
    with django_assert_num_queries(1):
        timeline = selectors.TermsTimeline.for_lease(amended_lease)
        from_timeline = [getattr(timeline.at(t), "version", None) for t in instants]
    from_queries = [
        getattr(selectors.terms_in_force(lease=amended_lease, at=t), "version", None)
        for t in instants
    ]
    assert from_timeline == from_queries
    assert set(from_timeline) == {None, 1, 2, 3}


def test_an_amendment_must_come_after_the_latest_version(amended_lease):
    with pytest.raises(ValidationError, match="after the latest version"):
        services.amend_terms(
            lease=amended_lease,
            effective_from=at("2026-10-20 00:00"),
            changes={"price_per_gb": Decimal("0.1")},
            reason="Backdated",
        )


def test_an_amendment_needs_a_reason_and_valid_values(amended_lease):
    with pytest.raises(ValidationError, match="needs a reason"):
        services.amend_terms(
            lease=amended_lease, effective_from=at("2027-06-01 00:00"), changes={}, reason=" "
        )
    with pytest.raises(ValidationError) as error:
        services.amend_terms(
            lease=amended_lease,
            effective_from=at("2027-06-01 00:00"),
            changes={"network_fee_per_month": Decimal("-1")},
            reason="Oops",
        )
    assert "A price cannot be negative." in error.value.messages
    assert amended_lease.terms.count() == 3


def test_amendments_are_recorded_with_their_reason(amended_lease):
    events = amended_lease.events.filter(action=LeaseEvent.Action.AMENDED).order_by("id")
    assert [(e.detail["version"], e.detail["reason"]) for e in events] == [
        (2, "Upgrade to 2x100G"),
        (3, "Stricter SLA"),
    ]


def test_multi_node_lease_below_25_gbps_is_warned_not_refused():
    lease = make_lease(nodes=NodeFactory.create_batch(2), contracted_bandwidth_gbps=Decimal("10"))
    assert selectors.contract_warnings(lease=lease) == [
        "Terms version 1 contracts 10 Gbps for a multi-node lease: below 25 Gbps, "
        "distributed training will wait on the network."
    ]
    single = make_lease(nodes=[NodeFactory()], contracted_bandwidth_gbps=Decimal("10"))
    assert selectors.contract_warnings(lease=single) == []
    at_floor = make_lease(
        nodes=NodeFactory.create_batch(2), contracted_bandwidth_gbps=Decimal("25")
    )
    assert selectors.contract_warnings(lease=at_floor) == []

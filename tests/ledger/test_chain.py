"""The ledger: one hash chain per lease whose links are rows of five kinds in three apps,
registered with it; appenders of one chain take turns on the lease's row."""

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from benchmarks.links import link_pending
from benchmarks.models import ProbeRun, Rejudgement
from gpulease_verify.chain import GENESIS, link_hash
from leases.links import link_tenant_record
from leases.models import Lease, LeaseTerms, TenantLink
from ledger import kinds
from ledger.chain import appending, chain_head, stored_links, verify_lease
from telemetry.models import TelemetryBatch
from tests.billing.test_ingest import a_session_waits_for_a_lock, in_thread
from tests.conftest import require
from tests.factories import at, make_lease, make_run


def test_the_registry_lists_every_kind_of_link_with_its_table_and_hash_column():
    listed = [(kind.name, kind.model, kind.hash_field) for kind in kinds.kinds()]
    assert listed == [
        ("run", ProbeRun, "run_hash"),
        ("terms", LeaseTerms, "terms_hash"),
        ("rejudgement", Rejudgement, "link_hash"),
        ("telemetry", TelemetryBatch, "link_hash"),
        ("tenant", TenantLink, "link_hash"),
    ]
    assert kinds.lease_model() is Lease


@pytest.mark.django_db
def test_a_chain_is_never_read_with_a_kind_missing(monkeypatch):
    """Without telemetry's batches the head would be wrong and the next link a fork."""
    lease = make_lease()
    monkeypatch.delitem(kinds._kinds, "telemetry")
    with pytest.raises(ImproperlyConfigured, match="'telemetry'"):
        chain_head(lease_id=lease.pk)
    with pytest.raises(ImproperlyConfigured, match="'telemetry'"):
        kinds.register(kinds.Kind("invoice", Lease, "pk", dict, list))


@pytest.mark.django_db
def test_links_of_two_kinds_share_one_index_sequence():
    lease = make_lease()  # terms v1 is link 1
    run = make_run(lease)
    link_pending(lease_id=lease.pk)
    record = link_tenant_record(lease_id=lease.pk, kind="note", content={"n": 1})
    run.refresh_from_db()
    assert run.chain_index == 2 and record.chain_index == 3
    assert record.prev_hash == run.run_hash
    assert record.link_hash == link_hash({"n": 1}, run.run_hash)
    assert chain_head(lease_id=lease.pk) == (3, record.link_hash)
    links = stored_links(lease_id=lease.pk, first=2, last=3)
    assert [(link.index, link.run_id, link.tenant_link_id) for link in links] == [
        (2, run.pk, None),
        (3, None, record.pk),
    ]
    assert stored_links(lease_id=lease.pk)[0].prev_hash == GENESIS
    assert verify_lease(lease_id=lease.pk) == []


@pytest.mark.django_db(transaction=True)
def test_two_appends_to_one_lease_at_once_take_turns():
    """One appender holds the chain with a tenant record linked but not committed; a run
    appended meanwhile waits for it, then follows it. Without the lock both would read
    head 1 (the terms) and the run would repeat index 2: a fork of the chain."""
    require(connection.vendor == "postgresql", "row locks are PostgreSQL's")
    lease = make_lease(starts_at=at("2026-11-01 00:00"))
    run = make_run(lease, slot=at("2026-11-02 10:00"))
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    linked: list[TenantLink] = []

    def hold_with_a_record() -> None:
        with transaction.atomic(), appending([lease.pk]):
            linked.append(link_tenant_record(lease_id=lease.pk, kind="note", content={"n": 1}))
            holding.set()
            assert release.wait(20)

    def append_the_run() -> None:
        link_pending(lease_id=lease.pk)

    holder = in_thread(hold_with_a_record, errors)
    assert holding.wait(10)
    appender = in_thread(append_the_run, errors)
    try:
        assert a_session_waits_for_a_lock(), "the second appender never waited for the chain"
        run.refresh_from_db()
        assert run.chain_index is None  # still waiting
    finally:
        release.set()
        holder.join(30)
        appender.join(30)
    assert errors == []
    run.refresh_from_db()
    (record,) = linked
    assert (record.chain_index, run.chain_index) == (2, 3)
    assert run.prev_hash == record.link_hash
    assert chain_head(lease_id=lease.pk) == (3, run.run_hash)
    assert verify_lease(lease_id=lease.pk) == []

# ruff: noqa: RUF001 (the zh invoice text and page keep full-width punctuation)
"""The repair-time objective and its credit (issue 32 item 7): terms set
``repair_objective_minutes`` and ``repair_credit_percent``; each network fault resolved in
the billed window whose repair time exceeds the objective adds that percent of the credit
base to the month's credit (``gpulease_verify.repair``). Times are Asia/Shanghai (``at``).

The lease month below goes the real way: throughput runs, ingest opening and closing the
incidents, the invoice's credit line, the SLA report (API and portal), the voucher, and the
signed audit bundle that gpulease-verify re-derives. The lease (fee 6,543.21, objective
60 min, 5 % per miss, faults confirmed off so one failed sample is a failed sample):

| fault | fails (3 in a row, every 5 min) | resolved (passing run finished) | repair | |
| --- | --- | --- | --- | --- |
| a | 11-03 10:00 | 11-03 11:30 | 90.0 min | miss |
| b | 11-10 02:00 | 11-10 02:45 | 45.0 min | met |
| c | 11-12 08:00 | 11-12 09:01 | 61.0 min | miss |
| d | 11-14 08:00 | 11-14 09:00 | 60.0 min | met: 60 is not over 60 |
| e | 10-31 23:00 | 11-01 00:30 | 90.0 min | miss, November's (resolved in it) |
| f | 11-30 22:00 | 12-01 00:00 | 120.0 min | miss, December's (its first instant) |

November: three misses (a, c, e): 3 x 5 % = 15 % of 6,543.21 = 981.4815 -> 981.48. The
SLA tiers earn nothing (no tier below 1 %). December has no sample (compliance unknown, no
SLA credit) and one miss (f): 5 % of 6,543.21 = 327.1605 -> 327.16. October: e was not
resolved in it: nothing.
"""

import copy
import re
from datetime import timedelta
from decimal import Decimal as D

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import audit, invoicing, services
from billing.documents.labels import line_text
from billing.ingest import ingest_all
from billing.models import Invoice, Voucher
from gpulease_verify import repair as rules
from gpulease_verify.terms import terms_content
from incidents.models import Incident
from leases import services as lease_services
from leases.choices import LeaseStatus, ProbeKind
from leases.links import terms_fields
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db

FEE = D("6543.21")
NO_TIER = [{"below_percent": "1", "credit_percent": "10"}]
CAPPED = [{"below_percent": "50", "credit_percent": "60"}]  # 60 % tier, cap 50 %
FAULTS = {
    "a": ("2026-11-03 10:00", "2026-11-03 11:30"),
    "b": ("2026-11-10 02:00", "2026-11-10 02:45"),
    "c": ("2026-11-12 08:00", "2026-11-12 09:01"),
    "d": ("2026-11-14 08:00", "2026-11-14 09:00"),
    "e": ("2026-10-31 23:00", "2026-11-01 00:30"),
    "f": ("2026-11-30 22:00", "2026-12-01 00:00"),
}
AFTER = {
    "2026-10": at("2026-11-01 02:00"),
    "2026-11": at("2026-12-01 02:00"),
    "2026-12": at("2027-01-01 02:00"),
}


def fault(lease, opened: str, closed: str) -> None:  # type: ignore[no-untyped-def]
    """Three failed throughput samples 5 minutes apart from ``opened``, then a passing one
    that finishes at ``closed``."""
    first = at(opened)
    for step in range(3):
        make_run(lease, slot=first + timedelta(minutes=5 * step), cadence_s=300,
                 measured_bps=50 * 10**9, verdict="fail")  # fmt: skip
    end = at(closed)
    make_run(lease, slot=end - timedelta(minutes=5), cadence_s=300, finished=end,
             measured_bps=99 * 10**9)  # fmt: skip


def leased(tiers=NO_TIER, percent="5", objective=60, mode="line"):  # type: ignore[no-untyped-def]
    lease = make_lease(
        reference="ZY-2026-0707",
        starts_at=at("2026-10-01 00:00"),
        nodes=NodeFactory.create_batch(2),
        network_fee_per_month=FEE,
        node_rent_per_month=D("0"),
        credit_tiers=tiers,
        credit_cap_percent=D("50"),
        confirm_failures=False,
        repair_objective_minutes=objective,
        repair_credit_percent=D(percent),
        credit_mode=mode,
    )
    lease = lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)
    for opened, closed in FAULTS.values():
        fault(lease, opened, closed)
    ingest_all(notify=False)
    return lease


def credit_line(lease, period):  # type: ignore[no-untyped-def]
    invoice = invoicing.draft_invoice(tenant=lease.tenant, period=period, now=AFTER[period])
    return invoice.lines.filter(kind="sla_credit").first()


def ids(lease) -> dict[str, int]:  # type: ignore[no-untyped-def]
    by_open = {i.opened_at: i.pk for i in Incident.objects.filter(lease=lease)}
    return {name: by_open[at(opened)] for name, (opened, _closed) in FAULTS.items()}


# --- the rule, by hand ----------------------------------------------------------------


class Fault:
    def __init__(self, id: int, minutes: int, closed: str = "2026-11-10 12:00") -> None:
        self.id, self.kind = id, "throughput"
        self.closed_at = at(closed)
        self.opened_at = self.closed_at - timedelta(minutes=minutes)


NOVEMBER = (at("2026-11-01 00:00"), at("2026-12-01 00:00"))


def test_two_of_four_faults_miss_and_60_minutes_is_no_miss():
    # 90, 45, 61, 60 against 60 min: 90 and 61 miss; 2 x 5 % x 6,543.21 = 654.321 -> 654.32.
    found = rules.repair_credit(
        incidents=[Fault(1, 90), Fault(2, 45), Fault(3, 61), Fault(4, 60)],
        start=NOVEMBER[0],
        end=NOVEMBER[1],
        objective_minutes=60,
        credit_percent=D("5"),
        base=FEE,
    )
    assert [r.id for r in found.misses] == [1, 3]
    assert (found.percent_applied, found.amount, found.capped) == (D("10"), D("-654.32"), False)


def test_with_the_sla_credit_at_its_cap_the_two_never_exceed_the_base():
    # SLA 50 % (the cap) of 6,543.21 = 3,271.605 -> 3,271.61. Repair 10 % more: 654.32;
    # the line: 60 %, 3,925.93.
    sla = (D("50"), D("-3271.61"))
    two = rules.repair_credit(
        incidents=[Fault(1, 90), Fault(3, 61)], start=NOVEMBER[0], end=NOVEMBER[1],
        objective_minutes=60, credit_percent=D("5"), base=FEE, sla_percent=sla[0],
        sla_amount=sla[1],
    )  # fmt: skip
    assert rules.credit_line(*sla, two) == (D("60"), D("-3925.93"))
    # At 30 % a miss, 60 % is due but only 50 % is left: 3,271.605 -> 3,271.61 would make
    # the two 6,543.22, one fen over the base: the repair credit is 6,543.21 - 3,271.61.
    over = rules.repair_credit(
        incidents=[Fault(1, 90), Fault(3, 61)], start=NOVEMBER[0], end=NOVEMBER[1],
        objective_minutes=60, credit_percent=D("30"), base=FEE, sla_percent=sla[0],
        sla_amount=sla[1],
    )  # fmt: skip
    assert (over.percent_due, over.percent_applied, over.amount, over.capped) == (
        D("60"),
        D("50"),
        D("-3271.60"),
        True,
    )
    assert rules.credit_line(*sla, over) == (D("100"), -FEE)


def test_minutes_are_exact_to_the_microsecond_and_a_tenth_over_is_a_miss():
    opened = at("2026-11-10 10:00")
    assert rules.minutes(opened, opened + timedelta(minutes=60, seconds=2)) == D("60.0")
    assert rules.minutes(opened, opened + timedelta(minutes=60, seconds=3)) == D("60.1")
    assert rules.exact_minutes(opened, opened + timedelta(microseconds=60)) == D("0.000001")


# --- the real path ----------------------------------------------------------------------


def test_ingest_records_the_faults_and_the_invoice_line_carries_the_repair_credit():
    lease = leased()
    named = ids(lease)
    got = {
        name: str(rules.minutes(i.opened_at, i.closed_at))
        for name, i in ((n, Incident.objects.get(pk=pk)) for n, pk in named.items())
    }
    assert got == {"a": "90.0", "b": "45.0", "c": "61.0", "d": "60.0", "e": "90.0", "f": "120.0"}
    # October: its 3 samples all failed (compliance 0 %, below 1 %: 10 %, 654.32), but e
    # was resolved in November: no fault of October's, nothing added.
    october = credit_line(lease, "2026-10")
    assert (october.amount, october.detail["repair"]["incidents"]) == (D("-654.32"), [])
    line = credit_line(lease, "2026-11")
    assert (line.quantity, line.unit_price, line.amount) == (D("15"), FEE, D("-981.48"))
    assert line.description.endswith(
        "0% of network fee 6543.21; repair-time objective 60 min: 3 of 5 fault(s) over it "
        f"(#{named['e']} 90.0 min, #{named['a']} 90.0 min, #{named['c']} 61.0 min), "
        "15.00% of network fee 6543.21"
    )
    repair = line.detail["repair"]
    assert (repair["misses"], repair["amount"], repair["objective_minutes"]) == (3, "-981.48", 60)
    assert [(r["id"], r["missed"]) for r in repair["incidents"]] == [
        (named["e"], True),
        (named["a"], True),
        (named["b"], False),
        (named["c"], True),
        (named["d"], False),
    ]
    from django.utils import translation

    with translation.override("zh-hans"):
        text = line_text(line)
    assert text.endswith(
        f"；修复时间目标 60 分钟：5 次故障中 3 次超时（#{named['e']} 90.0 分钟，"
        f"#{named['a']} 90.0 分钟，#{named['c']} 61.0 分钟），按网络费 6543.21 的 15.00%"
    )
    # December: no sample at all (compliance unknown, no SLA credit), f missed: 327.16.
    december = credit_line(lease, "2026-12")
    assert (december.quantity, december.amount) == (D("5"), D("-327.16"))


def test_the_report_api_and_portal_show_the_objective_and_its_misses():
    lease = leased()
    named = ids(lease)
    viewer = MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user
    api = APIClient()
    api.force_login(viewer)
    report = api.get(f"/api/v1/leases/{lease.pk}/sla/", {"period": "2026-11"}).json()
    objective = report["repair_objective"]
    assert (objective["objective_minutes"], objective["misses"], objective["amount"]) == (
        60,
        3,
        "-981.48",
    )
    assert (report["credit"]["amount"], report["credit"]["total_amount"]) == ("0.00", "-981.48")
    missed = {row["id"]: row["missed_repair_objective"] for row in report["incidents"]}
    assert missed[named["a"]] is True and missed[named["d"]] is False
    assert missed[named["f"]] is None  # resolved in December
    page = client_for(viewer).get(f"/leases/{lease.pk}/sla/?period=2026-11").content.decode()
    row = page[page.index('<tr class="repair-objective">') :]
    row = " ".join(row[: row.index("</tr>")].split())
    text = re.sub(r"<[^>]+>", "", row)
    assert text == (
        f"Repair-time objective credit ¥-981.48 objective 60 min: 3 of 5 network faults over "
        f"it: #{named['e']} 90.0 min #{named['a']} 90.0 min #{named['c']} 61.0 min; 15.00 % "
        "of the credit base (5.00 % per fault over the objective). Credit this month in all: "
        "¥-981.48."
    )
    chinese = client_for(viewer, "zh-hans").get(f"/leases/{lease.pk}/sla/?period=2026-11")
    assert "目标 60 分钟：5 次网络故障中 3 次超时" in chinese.content.decode()


def test_the_verifier_rederives_the_repair_credit_and_names_a_forged_closed_at():
    lease = leased()
    named = ids(lease)
    credit_line(lease, "2026-11")
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=AFTER["2026-11"])
    assert audit.verify(doc, audit.published_key_info()["public_key_pem"]) == []
    bundle = doc["bundle"]
    carried = {entry["id"]: entry for entry in bundle["incidents"]}
    c = carried[named["c"]]
    assert (c["opened_at"], c["closed_at"], c["repair_minutes"]) == (
        "2026-11-12T00:00:00.000000Z",
        "2026-11-12T01:01:00.000000Z",
        "61.0",
    )
    assert len(c["opened_by_runs"]) == 3 and c["closed_by_run"] is not None
    assert bundle["credit"]["repair"]["amount"] == "-981.48"
    # Forged: c resolved at 08:59 (59 min, no miss), its figures and the credit made to
    # agree, and the bundle signed again: the run that resolved it says otherwise.
    forged = copy.deepcopy(doc)
    entry = next(e for e in forged["bundle"]["incidents"] if e["id"] == named["c"])
    entry["closed_at"], entry["repair_minutes"] = "2026-11-12T00:59:00.000000Z", "59.0"
    mismatches = audit.verify(
        audit.sign_bundle(forged["bundle"], Ed25519PrivateKey.generate()),
        trust_embedded_key=True,
    )
    run = next(r for r in bundle["runs"] if r["id"] == c["closed_by_run"])
    assert (
        f"incident {named['c']} closed_at: the bundle says 2026-11-12T00:59:00.000000Z, but the "
        f"run that resolved it (run {run['id']}, chain link {run['chain_index']}) finished at "
        "2026-11-12T01:01:00.000000Z"
    ) in mismatches
    # The credit recomputed from the forged instant no longer matches what was stated.
    assert (
        f"repair credit: incident {named['c']} took 61.0 min by the bundle, recomputed 59.0"
    ) in mismatches
    assert "repair credit amount: the bundle says -981.48, recomputed -654.32" in mismatches


def test_a_voucher_carries_the_sla_and_the_repair_credit():
    # The SLA tier 60 % capped at 50 %: 3,271.605 -> 3,271.61; plus 15 % (981.48) = 65 %,
    # 4,253.09: one voucher of 4,253.09, no credit line.
    lease = leased(tiers=CAPPED, mode="voucher")
    draft = invoicing.draft_invoice(tenant=lease.tenant, period="2026-11", now=AFTER["2026-11"])
    assert not draft.lines.filter(kind="sla_credit").exists()
    issued = services.issue_invoice(invoice=draft, now=AFTER["2026-11"])
    assert Voucher.objects.get(source_invoice=issued).amount == D("4253.09")
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=AFTER["2026-11"])
    assert audit.verify(doc, audit.published_key_info()["public_key_pem"]) == []


def test_terms_without_an_objective_keep_todays_figures_and_hashes():
    lease = leased(tiers=CAPPED, percent="0", objective=None)
    line = credit_line(lease, "2026-11")
    # Only the SLA credit: 50 % of 6,543.21 = 3,271.61, its text and detail as before.
    assert (line.quantity, line.amount) == (D("50"), D("-3271.61"))
    assert "repair" not in line.detail and "repair-time" not in line.description
    fields = terms_fields(lease.terms.get())
    older = {
        k: v
        for k, v in fields.items()
        if k not in ("repair_objective_minutes", "repair_credit_percent")
    }
    assert terms_content(fields) == terms_content(older)
    changed = terms_content(
        {**fields, "repair_objective_minutes": 60, "repair_credit_percent": "5"}
    )
    assert (changed["repair_objective_minutes"], changed["repair_credit_percent"]) == (60, "5")
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=AFTER["2026-11"])
    assert "repair" not in doc["bundle"]["credit"]
    assert audit.verify(doc, audit.published_key_info()["public_key_pem"]) == []
    assert Invoice.objects.filter(tenant=lease.tenant, period="2026-11").count() == 1


def test_the_server_and_the_verifier_share_the_kinds_of_network_fault():
    assert {*ProbeKind.values, "telemetry"} == rules.REPAIR_KINDS

"""Evidence pages: a tenant admin pastes their own tool output, it is parsed and judged as
the probes would, and the verdict is shown; viewers read only; other tenants get 404."""

import html as htmllib
import re
from decimal import Decimal

import pytest

from accounts.choices import Role
from billing.models import Evidence
from gpulease_verify.parsers import ParseError, parse_iperf3
from tests.benchmarks.parsers import fixture_text
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease
from tests.portal.support import NOW, active, client_for

pytestmark = pytest.mark.django_db

# iperf 3.14 TCP, published sample: end.sum_received.bits_per_second = 204737447.4407,
# that is 204.7 Mbit/s (tests/benchmarks/parsers/test_iperf3.py reads the same figure).
IPERF3 = fixture_text("iperf3", "tcp_3.14_macos.json")
TRUNCATED = fixture_text("iperf3", "tcp_3.9_stored_truncated.json")


@pytest.fixture
def admin():
    return MembershipFactory(role=Role.ADMIN)


@pytest.fixture
def lease(admin):
    nodes = [NodeFactory(hostname="gz-a100-01"), NodeFactory(hostname="gz-a100-02")]
    return active(make_lease(tenant=admin.tenant, reference="ZY-2026-201", nodes=nodes))


def upload(client, lease, **fields):
    data = {"tool": "iperf3", "nodes": ["gz-a100-01", "gz-a100-02"], "raw_output": IPERF3}
    data.update(fields)
    return client.post(f"/leases/{lease.pk}/evidence/new/", data)


def verdict_text(page: str) -> str:
    match = re.search(r'<p id="verdict"[^>]*>(.*?)</p>', page, re.S)
    assert match, "no #verdict on the page"
    return htmllib.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def test_the_form_has_the_fields_the_nodes_and_the_guide(admin, lease):
    response = client_for(admin.user).get(f"/leases/{lease.pk}/evidence/new/")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<select name="tool"' in page and 'value="iperf3"' in page
    assert '<textarea name="raw_output"' in page
    assert page.count('type="checkbox" name="nodes"') == 2
    assert 'value="gz-a100-01"' in page and 'value="gz-a100-02"' in page
    assert '<button type="submit">' in page
    for command in (
        "ibstatus",
        "rdma link show",
        "-P 4 -t 30 -J",
        "ib_write_bw -d &lt;device&gt; -x 3 --report_gbits &lt;server&gt;",
        "all_reduce_perf -b 8 -e 8G -f 2 -g 1",
    ):
        assert command in page


def test_iperf3_output_is_parsed_judged_and_shown_with_its_verdict(admin, lease):
    client = client_for(admin.user)
    response = upload(client, lease)
    evidence = Evidence.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/leases/{lease.pk}/evidence/{evidence.pk}/"
    assert evidence.measured_bps == 204737447
    assert sorted(evidence.nodes.values_list("hostname", flat=True)) == [
        "gz-a100-01",
        "gz-a100-02",
    ]
    assert evidence.measured_at == NOW

    page = client.get(response["Location"]).content.decode()
    # 204.7 Mbit/s is 0.2% of 100 Gbit/s, below the 95% threshold of 95 Gbit/s.
    assert verdict_text(page) == (
        "Verdict: fail — measured 204.7 Mbit/s (0.2% of contracted), below 95 Gbit/s"
    )
    assert 'id="measured-bandwidth">204.7 Mbit/s<' in page
    assert "100 Gbit/s" in page  # contracted, the terms it was judged against
    assert "throughput &gt;= 95% of 100 Gbps contracted (terms v1)" in page
    assert "2026-11-20 12:00 (Asia/Shanghai)" in page
    assert "received_bps" in page  # the parsed result


def test_the_verdict_reads_in_the_pages_language(admin, lease):
    client = client_for(admin.user, "zh-hans")
    response = upload(client, lease)
    page = client.get(response["Location"]).content.decode()
    # The same figures as in English: 204.7 Mbit/s, 0.2 % of 100 Gbit/s, under 95 Gbit/s.
    assert "实测 204.7 Mbit/s（合同带宽的 0.2%），低于 95 Gbit/s" in verdict_text(page)  # noqa: RUF001
    assert "吞吐量 &gt;= 合同 100 Gbps 的 95%（条款第 1 版）" in page  # noqa: RUF001
    assert "measured 204.7" not in page
    # The record keeps the verifier's English, as the API and the audit bundle carry it.
    assert Evidence.objects.get().verdict_reason.startswith("measured 204.7 Mbit/s")


def test_a_measurement_above_the_threshold_passes(admin):
    nodes = [NodeFactory(hostname="sz-lab-01"), NodeFactory(hostname="sz-lab-02")]
    small = active(
        make_lease(
            tenant=admin.tenant,
            reference="ZY-2026-202",
            nodes=nodes,
            contracted_bandwidth_gbps=Decimal("0.2"),
        )
    )
    client = client_for(admin.user)
    response = upload(client, small, nodes=["sz-lab-01", "sz-lab-02"])
    page = client.get(response["Location"]).content.decode()
    # 95% of 0.2 Gbit/s is 190 Mbit/s; 204.7 Mbit/s passes.
    assert verdict_text(page) == "Verdict: pass — measured 204.7 Mbit/s, at or above 190 Mbit/s"


def test_unparsable_output_shows_the_parsers_reason_and_keeps_the_text(admin, lease):
    with pytest.raises(ParseError) as parser:
        parse_iperf3(TRUNCATED)
    response = upload(client_for(admin.user), lease, raw_output=TRUNCATED)
    assert response.status_code == 400
    page = response.content.decode()
    assert htmllib.escape(f"Unparsable iperf3 output: {parser.value}") in page
    textarea = re.search(r'<textarea name="raw_output"[^>]*>(.*?)</textarea>', page, re.S)
    assert textarea and htmllib.unescape(textarea.group(1)).strip() == TRUNCATED.strip()
    assert not Evidence.objects.exists()


def test_a_pair_tool_needs_exactly_two_nodes_and_the_form_says_so(admin, lease):
    response = upload(client_for(admin.user), lease, nodes=["gz-a100-01"])
    assert response.status_code == 400
    assert "iperf3 measures between two nodes: name exactly two." in response.content.decode()
    assert not Evidence.objects.exists()


def test_a_node_that_is_not_the_leases_is_refused_by_the_form(admin, lease):
    NodeFactory(hostname="other-node")
    response = upload(client_for(admin.user), lease, nodes=["gz-a100-01", "other-node"])
    assert response.status_code == 400
    assert "Select a valid choice. other-node" in htmllib.unescape(response.content.decode())


def test_measured_at_is_read_in_the_tenants_time_zone(admin, lease):
    upload(client_for(admin.user), lease, measured_at="2026-11-19T09:30")
    assert Evidence.objects.get().measured_at == at("2026-11-19 09:30")


def test_a_measurement_from_the_future_is_refused_on_its_field(admin, lease):
    response = upload(client_for(admin.user), lease, measured_at="2026-11-21T09:30")
    assert response.status_code == 400
    assert "A measurement cannot come from the future." in response.content.decode()


def test_a_viewer_reads_a_clear_refusal_and_cannot_submit(admin, lease):
    viewer = MembershipFactory(tenant=admin.tenant, role=Role.VIEWER)
    client = client_for(viewer.user)
    response = client.get(f"/leases/{lease.pk}/evidence/new/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "only an admin of its tenant or provider staff can submit evidence" in page
    assert "<textarea" not in page
    assert upload(client, lease).status_code == 403
    assert not Evidence.objects.exists()
    # ... but reads the evidence others submitted, and gets no link to the form.
    upload(client_for(admin.user), lease)
    evidence = Evidence.objects.get()
    detail = client.get(f"/leases/{lease.pk}/evidence/{evidence.pk}/")
    assert detail.status_code == 200
    assert (
        f"/leases/{lease.pk}/evidence/new/"
        not in client.get(f"/leases/{lease.pk}/").content.decode()
    )


def test_staff_may_submit_for_any_lease(lease):
    response = upload(client_for(StaffFactory()), lease)
    assert response.status_code == 302


def test_another_tenants_lease_and_evidence_are_404(admin, lease):
    upload(client_for(admin.user), lease)
    evidence = Evidence.objects.get()
    stranger = MembershipFactory(role=Role.ADMIN)
    other = active(
        make_lease(tenant=stranger.tenant, reference="LX-2026-901", nodes=[NodeFactory()])
    )
    client = client_for(stranger.user)
    assert client.get(f"/leases/{lease.pk}/evidence/new/").status_code == 404
    assert upload(client, lease).status_code == 404
    assert client.get(f"/leases/{lease.pk}/evidence/{evidence.pk}/").status_code == 404
    # Evidence of one lease is not reachable under another, even one's own.
    assert client.get(f"/leases/{other.pk}/evidence/{evidence.pk}/").status_code == 404
    assert Evidence.objects.count() == 1


def test_the_lease_page_lists_evidence_newest_first_with_a_link_to_the_form(admin, lease):
    client = client_for(admin.user)
    upload(client, lease, measured_at="2026-11-18T08:00")
    upload(client, lease, measured_at="2026-11-19T08:00")
    page = client.get(f"/leases/{lease.pk}/").content.decode()
    assert f'href="/leases/{lease.pk}/evidence/new/"' in page
    newer, older = Evidence.objects.order_by("-measured_at")
    first = page.index(f"/leases/{lease.pk}/evidence/{newer.pk}/")
    second = page.index(f"/leases/{lease.pk}/evidence/{older.pk}/")
    assert first < second
    assert "2026-11-19 08:00" in page and "204.7 Mbit/s" in page

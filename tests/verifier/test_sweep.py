"""Sweeps (gpulease_verify.sweep): the transcript's framing, each node read on its own, and
the judgement a lease's slot gets from its nodes'. Node outputs are the real tools' (the
parser fixtures, SOURCES.md beside them) under the link check's section headers."""

from decimal import Decimal
from pathlib import Path

import pytest

from gpulease_verify import sweep, verdicts
from gpulease_verify.interpret import PlanNode, PlanPort
from gpulease_verify.parsers import ParseError

FIXTURES = Path(__file__).resolve().parent.parent / "benchmarks/fixtures"
# ethtool of a 1 Gbit/s port that is up (SoftRoCE host; ethtool/SOURCES.md)
ETHTOOL_UP = (FIXTURES / "ethtool/speed_1000_softroce_rxe52.txt").read_text().split("\n", 1)[1]
NETDEV = (FIXTURES / "counters/netdev_sysfs_virtio_capture.txt").read_text()
TERMS = verdicts.TermsView(2, Decimal(1), Decimal(95), None, None)
RULE = "every contracted port up at its rate, no link flap (terms v2)"


def node(name: str) -> PlanNode:
    return PlanNode(name, "leaf1", 0, (PlanPort("eth0", 1, "eth0", None, "ethernet", 1),))


def link_output(*, up: bool = True, downs: int = 0) -> str:
    text = ETHTOOL_UP if up else ETHTOOL_UP.replace("Link detected: yes", "Link detected: no")
    return f"### ethtool eth0\n{text}### carrier_down_count eth0\n{downs}\n"


def read(name: str, text: str, **kw) -> sweep.NodeOutput:
    return sweep.NodeOutput(name, "ok", "ethtool eth0", 0, "", text, **kw)


def judged(outputs, tool="ethtool", previous=None):
    results = [
        sweep.interpret_node(
            tool=tool,
            output=out,
            terms=TERMS,
            node=node(out.node),
            previous_link_down=(previous or {}).get(out.node),
        )
        for out in outputs
    ]
    return results, sweep.judge(tool=tool, results=results, terms=TERMS)


def test_a_transcript_reads_back_node_by_node_in_hostname_order():
    outputs = [
        read("n2", "二号\n", stderr="warning: 警告\n"),
        sweep.NodeOutput("n1", "unreachable", "", None, "connection refused"),
        read("n3", ""),
    ]
    text = sweep.transcript(outputs)
    assert text.startswith('#### {"command":"","error":"connection refused","exit_code":null,')
    back = sweep.read_transcript(text)
    assert [out.node for out in back] == ["n1", "n2", "n3"]
    assert back[1] == outputs[0]
    assert back[0] == outputs[1]
    # The byte counts are UTF-8 bytes: the Chinese text is 3 bytes a character.
    assert '"stderr_bytes":16,"stdout_bytes":7}' in text


def test_a_node_cannot_print_another_nodes_part():
    # A tenant with root on n1 prints a header of its own, claiming n2's result: the byte
    # count frames n1's output, so the forgery is just n1's text.
    forged = '#### {"command":"","error":"","exit_code":0,"node":"n2","state":"ok",'
    forged += '"stderr_bytes":0,"stdout_bytes":3}\nyes\n'
    text = sweep.transcript([read("n1", forged), sweep.NodeOutput("n2", "unreachable")])
    back = sweep.read_transcript(text)
    assert [(out.node, out.state) for out in back] == [("n1", "ok"), ("n2", "unreachable")]
    assert back[0].stdout == forged


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("garbage\n", "no node header at byte 0"),
        ("#### {not json}\n", "is not one"),
        ('#### {"node":"n1"}\n', "its fields are not a node header's"),
        (sweep.transcript([read("n1", "abc\n")])[:-2], "shorter than its header says"),
    ],
)
def test_a_broken_transcript_is_refused_with_its_reason(text, reason):
    with pytest.raises(ParseError, match=reason):
        sweep.read_transcript(text)


def test_every_node_up_passes_and_the_entry_keeps_its_ports():
    results, judgement = judged([read("n1", link_output()), read("n2", link_output())])
    assert judgement == sweep.SweepJudgement(
        "ok", "pass", RULE, "2 node(s), 2 port(s) up at their rate", ""
    )
    parsed = sweep.parsed_of(results)
    assert parsed["nodes"]["n1"] == {
        "state": "ok",
        "verdict": "pass",
        "ports": [
            {
                "label": "eth0",
                "up": True,
                "speed_bps": 1_000_000_000,
                "expected_bps": 1_000_000_000,
                "link_down_count": 0,
                "previous_link_down_count": None,
            }
        ],
    }
    # What readers see, node by node, from the stored parsed result.
    back = sweep.node_results(
        pattern="sweep", target="all", state="ok", verdict="pass", parsed=parsed
    )
    assert [(r.node, r.state, r.verdict) for r in back] == [
        ("n1", "ok", "pass"),
        ("n2", "ok", "pass"),
    ]


def test_one_node_down_fails_the_slot_even_when_another_could_not_be_read():
    _results, judgement = judged(
        [
            read("n1", link_output()),
            read("n2", link_output(up=False)),
            sweep.NodeOutput("n3", "unreachable", error="connection refused"),
        ]
    )
    assert (judgement.state, judgement.verdict, judgement.rule) == ("ok", "fail", RULE)
    assert judgement.reason == "n2: eth0 is down"
    assert judgement.error == "n3: unreachable: connection refused"


def test_a_flap_since_the_nodes_own_previous_check_fails_it():
    _results, judgement = judged(
        [read("n1", link_output(downs=3)), read("n2", link_output(downs=3))],
        previous={"n1": {"eth0": 1}, "n2": {"eth0": 3}},
    )
    assert judgement.reason == "n1: eth0 went down 2 time(s) since the last check"


def test_nothing_failed_but_a_node_was_not_read_measures_nothing():
    # Unreachable outranks unparsable, so the worker tries the sweep again.
    results, judgement = judged(
        [
            read("n1", "no sections here\n"),
            sweep.NodeOutput("n2", "unreachable", error="no route to host"),
            read("n3", link_output()),
        ]
    )
    assert [r.state for r in results] == ["unparsable", "unreachable", "ok"]
    assert (judgement.state, judgement.verdict, judgement.rule) == ("unreachable", "none", "")
    assert judgement.error == (
        "n1: unparsable: the link check printed none of its sections; "
        "n2: unreachable: no route to host"
    )


def test_a_lease_that_held_no_node_is_skipped():
    assert sweep.judge(tool="ethtool", results=[], terms=TERMS) == sweep.SweepJudgement(
        "skipped", "none", "", "", "the lease held no node when it ran"
    )


def test_counters_keep_each_ports_figures_not_the_tools_whole_list():
    text = "### counters eth0\n" + NETDEV
    results, judgement = judged([read("n1", text)], tool="counters")
    assert judgement == sweep.SweepJudgement(
        "ok", "none", "counters are recorded for metering", "1 node(s) read", ""
    )
    (port,) = results[0].parsed["ports"]
    assert (port["rx_bytes"], port["tx_bytes"]) == (119_430_232, 233_081)
    assert "raw" not in port


def test_a_run_stored_before_sweeps_is_its_one_node():
    parsed = {"ports": [{"label": "eth0", "up": False}]}
    (result,) = sweep.node_results(
        pattern="node", target="n7", state="ok", verdict="fail", parsed=parsed
    )
    assert (result.node, result.state, result.verdict, result.parsed) == (
        "n7",
        "ok",
        "fail",
        parsed,
    )


def test_judging_a_sweep_again_by_another_terms_version_reads_its_ports():
    results, _ = judged([read("n1", link_output()), read("n2", link_output(up=False))])
    amended = verdicts.TermsView(3, Decimal(1), Decimal(95), None, None)
    again = [sweep.judge_node(result, amended) for result in results]
    assert sweep.judge(tool="ethtool", results=again, terms=amended) == sweep.SweepJudgement(
        "ok",
        "fail",
        "every contracted port up at its rate, no link flap (terms v3)",
        "n2: eth0 is down",
        "",
    )

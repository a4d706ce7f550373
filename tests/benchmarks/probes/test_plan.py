from benchmarks.probes.plan import (
    PlanNode,
    PlanPort,
    cross_leaf_pairs,
    plan_batches,
    ring_pairs,
    same_leaf_pairs,
)

PORT = PlanPort("data0", 1, "data0", "198.18.0.11", "ethernet", 1)


def lab(n=4, leaves=2):
    per_leaf = n // leaves
    return [
        PlanNode(f"lab-h{i}", f"leaf{(i - 1) // per_leaf + 1}", 0, (PORT,)) for i in range(1, n + 1)
    ]


def names(pairs):
    return [f"{a.hostname}>{b.hostname}" for a, b in pairs]


def test_ring_goes_through_every_node_once():
    assert names(ring_pairs(lab())) == [
        "lab-h1>lab-h2",
        "lab-h2>lab-h3",
        "lab-h3>lab-h4",
        "lab-h4>lab-h1",
    ]
    assert names(ring_pairs(lab(2, 1))) == ["lab-h1>lab-h2"]
    assert ring_pairs(lab(1, 1)) == []


def test_cross_leaf_pairs_share_the_uplink_and_same_leaf_pairs_do_not():
    assert names(cross_leaf_pairs(lab())) == ["lab-h1>lab-h3", "lab-h2>lab-h4"]
    assert names(same_leaf_pairs(lab())) == ["lab-h1>lab-h2", "lab-h3>lab-h4"]
    # Eight nodes on four leaves: every concurrent pair still crosses leaves.
    eight = lab(8, 4)
    assert all(a.leaf != b.leaf for a, b in cross_leaf_pairs(eight))
    assert len(cross_leaf_pairs(eight)) == 4


def test_throughput_batches_on_ethernet_use_iperf3_ring_then_concurrent_patterns():
    batches = plan_batches(kind="throughput", nodes=lab(), technology="ethernet")
    assert [(b.pattern, [r.target for r in b.runs]) for b in batches] == [
        ("ring", ["lab-h1>lab-h2"]),
        ("ring", ["lab-h2>lab-h3"]),
        ("ring", ["lab-h3>lab-h4"]),
        ("ring", ["lab-h4>lab-h1"]),
        ("cross_leaf", ["lab-h1>lab-h3", "lab-h2>lab-h4"]),
        ("same_leaf", ["lab-h1>lab-h2", "lab-h3>lab-h4"]),
    ]
    assert {r.tool for b in batches for r in b.runs} == {"iperf3"}
    assert all(b.exclusive for b in batches)


def test_rdma_fabrics_also_measure_with_perftest():
    batches = plan_batches(kind="throughput", nodes=lab(2, 1), technology="roce")
    assert [r.tool for b in batches for r in b.runs] == ["iperf3", "ib_write_bw"]
    latency = plan_batches(kind="latency", nodes=lab(2, 1), technology="infiniband")
    assert [r.tool for b in latency for r in b.runs] == ["ib_write_lat"]


def test_node_checks_are_one_sweep_of_every_node_and_not_exclusive():
    for kind, tool in (("link", "ethtool"), ("counters", "counters")):
        [batch] = plan_batches(kind=kind, nodes=lab(), technology="ethernet")
        [run] = batch.runs
        assert (run.tool, run.pattern, run.target) == (tool, "sweep", "all")
        assert run.nodes == ("lab-h1", "lab-h2", "lab-h3", "lab-h4")
        assert not batch.exclusive
    assert plan_batches(kind="link", nodes=[], technology="ethernet") == []
    collective = plan_batches(kind="collective", nodes=lab(), technology="ethernet")
    assert [r.target for r in collective[0].runs] == ["all"]

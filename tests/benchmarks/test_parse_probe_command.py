import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


def test_prints_one_json_object(capsys):
    call_command(
        "parse_probe", "nccl-tests", str(FIXTURES / "nccl-tests/single_node_8xv100_oci.txt")
    )
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    result = json.loads(out)
    assert result["collective"] == "all_reduce"
    assert result["avg_busbw_bps"] == 1_083_640_000_000  # 135.455 GB/s * 8e9


def test_accepts_counters(capsys):
    call_command("parse_probe", "counters", str(FIXTURES / "counters/sysfs_ib_counters_mlx5.txt"))
    assert json.loads(capsys.readouterr().out)["ports"][0]["rx_bytes"] == 35_295_656_084


def test_parse_error_is_one_line_on_stderr_and_exit_1(capsys):
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "parse_probe", "iperf3", str(FIXTURES / "iperf3/derived_error_connection_refused.json")
        )
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "parse_probe: iperf3 reported an error: unable to connect to server: Connection refused\n"
    )


def test_unknown_tool_lists_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        call_command("parse_probe", "netperf", str(FIXTURES / "ethtool/mana_speed_100mbps.txt"))
    err = capsys.readouterr().err
    assert err.startswith("parse_probe: unknown tool 'netperf'; known tools: iperf3, perftest")
    assert err.count("\n") == 1


def test_unreadable_file(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        call_command("parse_probe", "ethtool", str(tmp_path / "missing.txt"))
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith("parse_probe: ")


def test_stdin_through_manage_py():
    completed = subprocess.run(
        [sys.executable, str(MANAGE), "parse_probe", "ethtool", "-"],
        input=(FIXTURES / "ethtool/mana_speed_100mbps.txt").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == {
        "interface": "enP30832s1",
        "speed_bps": 100_000_000,
        "duplex": "full",
        "link_detected": True,
    }


def test_garbage_through_manage_py_has_no_traceback():
    completed = subprocess.run(
        [sys.executable, str(MANAGE), "parse_probe", "perftest", "-"],
        input="\x00 not perftest at all",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr.startswith("parse_probe: ")
    assert completed.stderr.count("\n") == 1
    assert "Traceback" not in completed.stderr

"""iperf3 output in any of its three forms: `-J` JSON, `--json-stream` (3.17+) and the
human-readable text, client or server side, 3.0 to 3.18.

All become one Iperf3Result in bits per second. The figure that counts is the
receiver's rate, `received_bps`; with `--bidir` the server-to-client direction is in
`reverse_sent_bps` / `reverse_received_bps`. The readers' notes on what changed between
versions are in iperf3_json and iperf3_text.
"""

from __future__ import annotations

from .checks import readable
from .iperf3_json import parse_iperf3_json
from .iperf3_result import Iperf3Result
from .iperf3_text import looks_like_text, parse_iperf3_text

__all__ = ["Iperf3Result", "parse_iperf3"]


def parse_iperf3(text: str) -> Iperf3Result:
    readable(text, "iperf3")
    if looks_like_text(text):
        return parse_iperf3_text(text)
    return parse_iperf3_json(text)

from benchmarks.models.alerts import SiteAlert
from benchmarks.models.locks import NodeLock
from benchmarks.models.outputs import RawOutput
from benchmarks.models.rejudgements import (
    Rejudgement,
    effective_terms_id,
    effective_verdict,
    with_effective_judgement,
)
from benchmarks.models.runs import NOT_PASSED, SLOT_REACH, ProbeRun, slot_reach

__all__ = [
    "NOT_PASSED",
    "SLOT_REACH",
    "NodeLock",
    "ProbeRun",
    "RawOutput",
    "Rejudgement",
    "SiteAlert",
    "effective_terms_id",
    "effective_verdict",
    "slot_reach",
    "with_effective_judgement",
]

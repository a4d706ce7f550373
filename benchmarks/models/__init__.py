from benchmarks.models.alerts import SiteAlert
from benchmarks.models.counters import MissedRunCount
from benchmarks.models.locks import NodeLock, PendingWitness
from benchmarks.models.outputs import RawOutput
from benchmarks.models.rejudgements import (
    Rejudgement,
    effective_terms_id,
    effective_verdict,
    sample_verdict,
    with_confirmation,
    with_effective_judgement,
)
from benchmarks.models.runs import NOT_PASSED, SLOT_REACH, ProbeRun, slot_reach

__all__ = [
    "NOT_PASSED",
    "SLOT_REACH",
    "MissedRunCount",
    "NodeLock",
    "PendingWitness",
    "ProbeRun",
    "RawOutput",
    "Rejudgement",
    "SiteAlert",
    "effective_terms_id",
    "effective_verdict",
    "sample_verdict",
    "slot_reach",
    "with_confirmation",
    "with_effective_judgement",
]

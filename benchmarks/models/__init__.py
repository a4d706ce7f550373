from benchmarks.models.alerts import SiteAlert
from benchmarks.models.locks import NodeLock
from benchmarks.models.runs import NOT_PASSED, ProbeRun

__all__ = ["NOT_PASSED", "NodeLock", "ProbeRun", "SiteAlert"]

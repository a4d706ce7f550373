from benchmarks.models.alerts import SiteAlert
from benchmarks.models.locks import NodeLock
from benchmarks.models.runs import ProbeRun

__all__ = ["NodeLock", "ProbeRun", "SiteAlert"]

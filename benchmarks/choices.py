from django.db import models
from django.utils.translation import gettext_lazy as _


class RunState(models.TextChoices):
    SCHEDULED = "scheduled", _("scheduled")
    RUNNING = "running", _("running")
    OK = "ok", _("ok")
    FAILED = "failed", _("failed")
    TIMEOUT = "timeout", _("timed out")
    UNREACHABLE = "unreachable", _("unreachable")
    UNPARSABLE = "unparsable", _("unparsable")
    MISSED = "missed", _("missed")
    SKIPPED = "skipped", _("skipped")


# A run in one of these states is over; nothing will change it again.
FINAL_STATES = frozenset(RunState.values) - {RunState.SCHEDULED, RunState.RUNNING}


class Verdict(models.TextChoices):
    PASS = "pass", _("pass")
    FAIL = "fail", _("fail")
    NONE = "none", _("no verdict")


class Trigger(models.TextChoices):
    SCHEDULE = "schedule", _("schedule")
    MANUAL = "manual", _("run now")
    TENANT = "tenant", _("run now by the tenant")
    ACCEPTANCE = "acceptance", _("acceptance")
    # A failed scheduled sample measured again at once (gpulease_verify.samples).
    CONFIRMATION = "confirmation", _("confirmation")


# Runs asked for now rather than by the schedule: by the provider (manual) or the tenant.
ON_DEMAND = (Trigger.MANUAL, Trigger.TENANT)


class Pattern(models.TextChoices):
    """What a run covers: every node of the lease, each on its own (a link check's or a
    counters reading's sweep, ``gpulease_verify.sweep``); how the node pairs of a
    throughput or latency batch were chosen; or all nodes together (a collective)."""

    SWEEP = "sweep", _("every node")
    NODE = "node", _("one node")
    RING = "ring", _("ring pair")
    CROSS_LEAF = "cross_leaf", _("concurrent cross-leaf pairs")
    SAME_LEAF = "same_leaf", _("concurrent same-leaf pairs")
    ALL_NODES = "all_nodes", _("all nodes")


class Tool(models.TextChoices):
    ETHTOOL = "ethtool", "ethtool"
    IBSTATUS = "ibstatus", "ibstatus"
    COUNTERS = "counters", _("NIC counters")
    IPERF3 = "iperf3", "iperf3"
    IB_WRITE_BW = "ib_write_bw", "ib_write_bw"
    PING = "ping", "ping"
    IB_WRITE_LAT = "ib_write_lat", "ib_write_lat"
    ALL_REDUCE_PERF = "all_reduce_perf", "all_reduce_perf"

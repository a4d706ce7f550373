import logging
import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import RequestFactory

from leases.choices import BillingMode, LeaseStatus
from leases.models import Fabric, Lease, LeaseTerms, Node, NodeAssignment, Tenant

pytestmark = pytest.mark.django_db


def _counts():
    return {
        model.__name__: model.objects.count()
        for model in (Tenant, Fabric, Node, Lease, LeaseTerms, NodeAssignment)
    }


def test_demo_loads_the_described_world_and_is_idempotent(capsys, caplog):
    caplog.set_level(logging.WARNING)
    call_command("demo", history_days=1)
    first_output = capsys.readouterr().out
    # Warnings are summarised, one line per kind (not one per run: issue 33 item 7).
    kinds = Counter(record.msg for record in caplog.records if record.levelno >= logging.WARNING)
    assert [kind for kind, count in kinds.items() if count > 1] == []
    counts = _counts()
    call_command("demo", history_days=1)
    second_output = capsys.readouterr().out
    assert _counts() == counts
    assert "(0 objects created this run)" in second_output

    assert counts["Tenant"] == 2
    assert counts["Node"] >= 16
    assert set(Node.objects.values_list("gpu_count", flat=True)) == {8}
    assert {"A100", "A800", "H800"} <= set(Node.objects.values_list("gpu_model", flat=True))
    fabrics = {
        (f.technology, f.port_speed_gbps, f.topology, f.oversubscription_label, f.site.city)
        for f in Fabric.objects.select_related("site")
    }
    assert fabrics == {
        ("roce", 100, "leaf_spine", "2:1", "Shenzhen"),
        ("infiniband", 400, "fat_tree", "1:1", "Guangzhou"),
        ("roce", 25, "leaf_spine", "1:1", "Dongguan"),
    }
    assert set(LeaseTerms.objects.values_list("billing_mode", flat=True)) == set(BillingMode.values)
    assert LeaseTerms.objects.filter(version=2).exists(), "an amended lease"
    assert Lease.objects.filter(status=LeaseStatus.ACTIVE).count() == 4

    # The logins it prints are the ones that work, the same on both runs.
    logins = [line.split() for line in first_output.splitlines() if line.startswith("  ")]
    assert logins == [line.split() for line in second_output.splitlines() if line.startswith("  ")]
    for *_role, username, password in logins:
        request = RequestFactory().post("/accounts/login/")
        assert authenticate(request, username=username, password=password) is not None, username
    # Every role has a login, and the breached lease's own customer has one.
    usernames = [username for *_role, username, _password in logins]
    assert usernames == [
        "provider",
        "provider-ops",
        "zhiyuan-admin",
        "zhiyuan-viewer",
        "zhiyuan-auditor",
        "lingxi-admin",
    ]
    # The logins come last, so they are what the terminal shows when the demo is loaded.
    lines = first_output.rstrip().splitlines()
    assert lines[-7].startswith("Logins (local use only")
    assert all(line.startswith("  ") for line in lines[-6:])
    # The README's quick start names the same logins, in the same order.
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `([a-z-]+)` \|", quick_start, flags=re.MULTILINE) == usernames
    lingxi_admin = get_user_model().objects.get(username="lingxi-admin")
    seen = Lease.objects.visible_to(lingxi_admin).values_list("reference", flat=True)
    assert "LX-2026-001" in set(seen)
    assert "ZY-2026-001" not in set(seen)

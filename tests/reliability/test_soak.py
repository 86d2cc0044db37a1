"""The short soak (`make soak` with SOAK_MINUTES=2 and fewer users): the production web tier,
two task clusters, a PostgreSQL server and a Redis of the soak's own and simulated hosts, used
through the API while every kind of fault strikes; then no invariant may be broken.

It runs once, in the PostgreSQL run of the suite: the soak starts its own PostgreSQL whatever
database the suite uses, so a second run on SQLite would check nothing more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.soak.faults import KINDS
from tests.reliability.crowd import POSTGRES_ONLY

# The soak brings its own PostgreSQL whatever the suite uses: once per suite is enough.
pytestmark = [pytest.mark.slow, pytest.mark.postgres, POSTGRES_ONLY]

REPO = Path(__file__).resolve().parents[2]
# Users and faults for two minutes, then up to four of settling (lab/soak/invariants.py).
SOAK_TIMEOUT_S = 15 * 60


def test_a_short_soak_breaks_no_invariant_under_every_kind_of_fault(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "SQLITE_PATH", "DJANGO_SETTINGS_MODULE", "REDIS_URL")
    }
    env.update(
        SOAK_MINUTES="2",
        SOAK_USERS="40",
        SOAK_FAULT_EVERY="8",
        SOAK_SEED="29",
        SOAK_REPORT_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "-m", "lab.soak"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=SOAK_TIMEOUT_S,
    )
    reports = list(tmp_path.glob("*.json"))
    assert len(reports) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(reports[0].read_text())

    assert report["violations"] == [], done.stdout[-6000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Every kind of fault struck (the recovery from each is an invariant above).
    assert {kind: r["faults"] > 0 for kind, r in report["recovery"].items()} == {
        kind: True for kind in KINDS
    }
    # People used it: VMs taken, operated and returned, leases made and launched into.
    done_ok = {
        kind: any(status.startswith("2") for status in counts)
        for kind, counts in report["operations"].items()
    }
    wanted = ["allocate", "start", "return", "create lease", "launch", "migrate", "event poll"]
    assert {kind: done_ok.get(kind, False) for kind in wanted} == dict.fromkeys(wanted, True)

"""Two real task clusters share the hosts out: each syncs its half, no host is read by both at
once, and when one is killed (kill -9) the other syncs its hosts within two sync intervals."""

import hashlib
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from hosts.models import Host
from lab.lightsim import driver as lightsim
from tests.conftest import wait_until

pytestmark = pytest.mark.slow

INTERVAL = 2.0
CLUSTER_ENV = {
    "CORRAL_SYNC_INTERVAL": str(INTERVAL),
    "CORRAL_TICK_SECONDS": "0.2",
    "CORRAL_SYNC_THREADS": "2",
    "Q_WORKERS": "2",
}
HOSTS = 20


def _group(pgid: int) -> set[int]:
    """The processes of a task cluster (its own process group)."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.add(int(stat.parent.name))
    return pids


def _owners(hosts) -> Counter:
    return Counter(Host.objects.filter(pk__in=[h.pk for h in hosts]).values_list("sync_owner"))


def test_two_task_clusters_split_the_hosts_and_one_takes_over_when_the_other_is_killed(
    transactional_db, light_hosts, task_cluster
):
    hosts = light_hosts(HOSTS, vms=5, latency_ms=20)
    uri = hosts[0].uri
    overlaps_before = lightsim.control(uri, "stats")["overlaps"]
    first, second = task_cluster(**CLUSTER_ENV), task_cluster(**CLUSTER_ENV)

    wait_until(
        lambda: (
            sorted(_owners(hosts).values()) == [HOSTS // 2, HOSTS // 2]
            and Host.objects.filter(pk__in=[h.pk for h in hosts], status="up").count() == HOSTS
        ),
        timeout=60,
        message=lambda: f"not split: {_owners(hosts)}\n{first.log()[-2000:]}",
    )
    time.sleep(2 * INTERVAL)  # both clusters sync their halves for a while
    first_pids = _group(first.process.pid)
    # A cluster's id hashes the machine and its sentinel's pid (project.workers.cluster_id).
    first_ids = {
        hashlib.sha1(f"{socket.gethostname()}:{pid}".encode()).hexdigest()[:16]
        for pid in first_pids
    }
    firsts = set(
        Host.objects.filter(pk__in=[h.pk for h in hosts], sync_owner__in=first_ids).values_list(
            "name", flat=True
        )
    )
    assert len(firsts) == HOSTS // 2, "each cluster holds half of the hosts"

    killed_at = time.time()
    first.kill()

    def taken_over() -> bool:
        now = lightsim.control(uri, "stats")["hosts"]
        return all(
            any(
                int(pid) not in first_pids and at > killed_at
                for pid, at in now[name]["last_report"].items()
            )
            for name in firsts
        )

    wait_until(taken_over, timeout=2 * INTERVAL, interval=0.05, message=second.log()[-3000:])
    handed_over_in = time.time() - killed_at

    assert handed_over_in <= 2 * INTERVAL
    # Every host is held by the one cluster left, and no host was ever read by two at once.
    wait_until(lambda: len(_owners(hosts)) == 1, timeout=2 * INTERVAL)
    assert lightsim.control(uri, "stats")["overlaps"] == overlaps_before

"""Benchmarks of the API's lists and its restriction to what a caller may see, the power-state
sync of a large host report, a job's own overhead and the event feed's latency.

A scenario takes ``measure`` (bench/run.py) and returns table rows (benchmark, figure, goal,
met); bench/run.py lists every scenario of every module."""

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from bench.fleet import make_fleet
from hosts.models import Cluster, Host, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from project.access.grants import grant_role
from project.access.permissions import restrict
from project.models import Role

User = get_user_model()


def _scoped_user(cluster: Cluster) -> User:
    user, _ = User.objects.get_or_create(username="bench-user")
    grant_role(Role.objects.get(name="ClusterAdmin"), cluster, user=user)
    return user


def list_endpoints(measure):
    rows = []
    admin, _ = User.objects.get_or_create(username="bench-admin", is_superuser=True)
    counts = {}
    for size in (5, 200, 10_000):
        clusters, _ = make_fleet(size)
        user = _scoped_user(clusters[0])
        for who, caller in (("superuser", admin), ("one cluster grant", user)):
            client = APIClient()
            client.force_authenticate(caller)
            for endpoint in ("vms", "hosts", "clusters"):
                ms, queries = measure(lambda c=client, e=endpoint: c.get(f"/api/{e}/?limit=50"))
                counts.setdefault((who, endpoint), []).append(queries)
                rows.append(
                    (
                        f"GET /api/{endpoint}/ ({size} VMs, {who})",
                        f"{ms:.1f} ms, {queries} queries",
                        "queries constant",
                        "",
                    )
                )
    for (who, endpoint), seen in counts.items():
        rows.append(
            (
                f"queries /api/{endpoint}/ at 5/200/10,000 VMs ({who})",
                "/".join(map(str, seen)),
                "same at every size",
                "yes" if len(set(seen)) == 1 else "NO",
            )
        )
    return rows


def restriction(measure):
    clusters, _ = make_fleet(10_000)
    user = _scoped_user(clusters[0])
    ms, queries = measure(
        lambda: list(restrict(VirtualMachine.objects.all(), user, "hosts.view_virtualmachine"))
    )
    visible = restrict(VirtualMachine.objects.all(), user, "hosts.view_virtualmachine").count()
    return [
        (
            f"restrict 10,000 VMs, one cluster grant ({visible} visible)",
            f"{ms:.1f} ms, {queries} queries",
            "1 query",
            "yes" if queries == 1 else "NO",
        ),
    ]


def _sync_fleet(count: int):
    from hosts.models import HostStatus

    clusters, template = make_fleet(0, clusters=1)
    host = Host.objects.create(
        name="big",
        cluster=clusters[0],
        uri="qemu+ssh://root@big/system",
        status=HostStatus.UP,
        cpus=512,
        memory_mb=4 * 1024 * 1024,
    )
    VirtualMachine.objects.bulk_create(
        VirtualMachine(
            name=f"s{i}",
            cluster=clusters[0],
            template=template,
            host=host,
            status="up",
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
        )
        for i in range(count)
    )
    return host


def power_state_sync(measure):
    """Sync of a 5,000-VM host report: time, and rows written once the report repeats."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from hosts import driver, sync

    host = _sync_fleet(5000)
    report = driver.HostReport(
        cpus=512,
        memory_mb=4 * 1024 * 1024,
        cpu_model="x86_64",
        domains=[
            driver.DomainReport(uuid=str(u), name=n, power_state="running")
            for u, n in VirtualMachine.objects.filter(host=host).values_list("uuid", "name")
        ],
    )
    first_ms, _ = measure(lambda: sync.apply_report(host.pk, report), repeat=1)
    for _ in range(3):
        sync.apply_report(host.pk, report)
    with CaptureQueriesContext(connection) as ctx:
        result = sync.apply_report(host.pk, report)
    writes = [q for q in ctx.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    repeat_ms, queries = measure(lambda: sync.apply_report(host.pk, report))
    return [
        ("sync 5,000-VM report (first, all change)", f"{first_ms:.0f} ms", "", ""),
        (
            "sync 5,000-VM report (unchanged, repeated)",
            f"{repeat_ms:.0f} ms, {queries} queries",
            "<= 1000 ms",
            "yes" if repeat_ms <= 1000 else "NO",
        ),
        (
            "rows written by a repeated unchanged report",
            f"{result.vms_written} VMs, {len(writes)} UPDATEs",
            "0",
            "yes" if result.vms_written == 0 and not writes else "NO",
        ),
    ]


def job_overhead(measure):
    """Submitting and completing a one-step no-op job, in-process (no libvirt)."""
    from hosts import jobs
    from hosts.models import JobKind

    clusters, template = make_fleet(1, clusters=1)
    vm = VirtualMachine.objects.get()

    def one_job():
        job = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 1})
        jobs.run(job.pk, OPERATION_BY_KIND)

    ms, queries = measure(one_job, repeat=10)
    return [
        (
            "no-op job: submit + run + finish",
            f"{ms:.1f} ms, {queries} queries",
            "<= 50 ms",
            "yes" if ms <= 50 else "NO",
        )
    ]


def event_latency(measure):
    """Time from an event's commit to a waiting /api/events/ reader returning it."""
    import statistics
    import threading
    import time

    from django.db import connection

    from project import events
    from project.models import EventKind

    admin, _ = User.objects.get_or_create(username="bench-admin", is_superuser=True)
    latencies = []
    for _ in range(5):
        token = events.latest_token()
        got = {}

        def wait(token=token, got=got):
            got["events"] = events.read_since(admin, token, timeout=5)
            got["at"] = time.perf_counter()
            connection.close()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
        sent = time.perf_counter()
        events.emit(EventKind.CHANGED, "vm", 1, "bench")
        waiter.join()
        latencies.append((got["at"] - sent) * 1000)
    ms = statistics.median(latencies)
    return [
        (
            "event visible to a waiting /api/events/ reader",
            f"{ms:.0f} ms (median of 5)",
            "<= 1000 ms",
            "yes" if ms <= 1000 else "NO",
        )
    ]

"""A user's snapshots of a running real guest (the tiny guest on a real QEMU host, started for
the scenario): taking one and reverting to it, with the guest's memory and disk only, each as
the job Corral runs (submitted and run here, as a task worker runs it: the job's bookkeeping,
the libvirt call and the VM's settling), beside its floor, the same libvirt call on the same
guest made directly. Medians of a few rounds; skipped, with a row saying so, where QEMU cannot
run.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import libvirt
from django.conf import settings

from bench.qemu_scenarios import FIRST_LINE, _lab_host, _serial_log, _template, _wait, tear_down
from hosts import jobs
from hosts.models import Cluster, Host, JobKind, JobState, VirtualMachine, VmSnapshot
from hosts.operations import OPERATION_BY_KIND
from lab import qemuhosts, tinyguest

ROUNDS = 3
CLUSTER = "bench-snapshots"


def _job(kind: str, vm: VirtualMachine, **params) -> float:
    """Seconds to submit and run a ``kind`` job on ``vm`` here; it must succeed."""
    start = time.perf_counter()
    job = jobs.submit(kind, vm=vm, params=params)
    jobs.run(job.pk, OPERATION_BY_KIND)
    seconds = time.perf_counter() - start
    job.refresh_from_db()
    if job.state != JobState.SUCCEEDED:
        raise RuntimeError(f"{kind} failed: {job.error_message}")
    return seconds


def _through_corral(vm: VirtualMachine, memory: bool) -> tuple[list[float], list[float]]:
    """Take a snapshot and revert to it, ``ROUNDS`` times, as Corral's jobs: the seconds of
    each; the VM is started again after a disk-only revert (not timed)."""
    takes, reverts = [], []
    for n in range(ROUNDS):
        snapshot = VmSnapshot.objects.create(vm=vm, name=f"s-{memory}-{n}", memory=memory)
        takes.append(_job(JobKind.SNAPSHOT, vm, snapshot=snapshot.pk))
        reverts.append(_job(JobKind.SNAPSHOT_REVERT, vm, snapshot=snapshot.pk))
        if not memory:
            _job(JobKind.START, vm)
        _job(JobKind.SNAPSHOT_DELETE, vm, snapshot=snapshot.pk)
    return takes, reverts


def _floor(uri: str, uuid: str, memory: bool) -> tuple[list[float], list[float]]:
    """The same libvirt calls made directly on the guest's domain: the seconds of each."""
    conn = libvirt.open(uri)
    takes, reverts = [], []
    try:
        domain = conn.lookupByUUIDString(uuid)
        for n in range(ROUNDS):
            start = time.perf_counter()
            snapshot = domain.snapshotCreateXML(
                f"<domainsnapshot><name>floor-{memory}-{n}</name></domainsnapshot>", 0
            )
            takes.append(time.perf_counter() - start)
            start = time.perf_counter()
            force = libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_FORCE
            if memory:
                domain.revertToSnapshot(snapshot, force)
            else:
                domain.revertToSnapshot(snapshot, force | libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED)
                domain.destroy()
            reverts.append(time.perf_counter() - start)
            if not memory:
                domain.create()
            snapshot.delete(0)
    finally:
        conn.close()
    return takes, reverts


def _row(what: str, corral: list[float], floor: list[float]) -> tuple[str, str, str, str]:
    median, floor_median = statistics.median(corral), statistics.median(floor)
    return (
        f"tiny guest, running: {what} (median of {ROUNDS})",
        f"{median:.2f} s (floor, the libvirt call alone: {floor_median:.2f} s; "
        f"+{(median - floor_median) * 1000:.0f} ms)",
        "≤ floor + 1 s",
        "yes" if median <= floor_median + 1 else "NO",
    )


def real_snapshots(measure):
    if shutil.which("qemu-system-x86_64") is None:
        return [("snapshots of a real guest", "skipped: no qemu-system-x86_64 here", "", "")]
    store = Path(tempfile.mkdtemp(prefix="bench-images-"))
    settings.CORRAL_IMAGE_STORE = store
    daemon = qemuhosts.QemuHost(name="bench-snap", directory=qemuhosts.new_directory())
    try:
        qemuhosts.start(daemon)
        cluster = Cluster.objects.create(name=CLUSTER)
        host = _lab_host(daemon, cluster)
        template = _template(tinyguest.build(), name="bench-snapshot-tiny")
        vm = VirtualMachine.objects.create(
            name="bench-snapshots",
            cluster=cluster,
            template=template,
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
            pinned_host=host,
        )
        _job(JobKind.START, vm)
        _wait(lambda: FIRST_LINE in _serial_log(host, vm), "the guest's first line")
        vm.refresh_from_db()
        rows = []
        for memory, what in ((True, "with its memory"), (False, "disk only")):
            takes, reverts = _through_corral(vm, memory)
            floor_takes, floor_reverts = _floor(host.uri, str(vm.uuid), memory)
            rows.append(_row(f"take a snapshot {what}", takes, floor_takes))
            rows.append(_row(f"revert to a snapshot {what}", reverts, floor_reverts))
        accel = "KVM" if Host.objects.get(pk=host.pk).domain_type == "kvm" else "TCG"
        return [(f"{name} ({accel})", *rest) for name, *rest in rows]
    finally:
        tear_down([daemon], store, cluster=CLUSTER)

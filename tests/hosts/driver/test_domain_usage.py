"""A running domain's counters for its charts, from what ``getAllDomainStats`` gives of it
(keys as QEMU hosts name them): summed over its disks and NICs, its memory from the guest's
balloon figures when it gives them, else what its QEMU process holds; from a driver whose
stats give only the state (libvirt's test driver), asked call by call."""

import libvirt

from hosts.driver import DomainSpec, DomainUsage
from hosts.driver.libvirt.domains import _usage, domain_xml

KIB = 1024
QEMU_STATS = {
    "state.state": 1,
    "cpu.time": 42_000_000_000,
    "balloon.current": 1024 * KIB,
    "balloon.rss": 700 * KIB,
    "block.count": 2,
    "block.0.name": "vda",
    "block.0.rd.bytes": 1000,
    "block.0.wr.bytes": 300,
    "block.1.name": "sda",
    "block.1.rd.bytes": 24,
    "net.count": 1,
    "net.0.name": "vnet0",
    "net.0.rx.bytes": 5000,
    "net.0.tx.bytes": 7000,
}


def test_counters_are_summed_over_the_devices_and_memory_is_the_process_without_guest_figures():
    usage = _usage(None, QEMU_STATS)

    assert usage == DomainUsage(
        cpu_time_ns=42_000_000_000,
        memory_used_mb=700,
        disk_read_bytes=1024,
        disk_written_bytes=300,  # the CD-ROM gives no written bytes
        net_rx_bytes=5000,
        net_tx_bytes=7000,
    )


def test_the_guests_own_figures_give_its_memory_in_use_caches_left_out():
    stats = {**QEMU_STATS, "balloon.available": 1000 * KIB, "balloon.usable": 600 * KIB}

    assert _usage(None, stats).memory_used_mb == 400


def test_a_domain_without_disks_or_nics_has_no_such_figures():
    stats = {"state.state": 1, "cpu.time": 5, "balloon.current": 1, "block.count": 0}

    usage = _usage(None, stats)

    assert (usage.disk_read_bytes, usage.net_rx_bytes, usage.memory_used_mb) == (None, None, None)


def test_the_test_drivers_domains_are_asked_call_by_call():
    conn = libvirt.open("test:///default")
    spec = DomainSpec(
        uuid="0f6b7a52-3c1e-4d0e-9b1c-2a8c0c5e7d11",
        name="corral-usage",
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
        networks=("default",),
    )
    dom = conn.defineXML(domain_xml(spec, "TEST"))
    dom.create()

    usage = _usage(dom, {"state.state": 1})

    assert usage.cpu_time_ns > 0
    assert usage.disk_read_bytes > 0 and usage.disk_written_bytes > 0
    assert usage.net_rx_bytes > 0 and usage.net_tx_bytes > 0

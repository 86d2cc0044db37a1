"""Domains on a host: define from a spec, power operations, snapshots, migration, reports."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import weakref
from dataclasses import replace
from datetime import UTC, datetime
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

import libvirt

from hosts.driver import uris
from hosts.driver.base import (
    ACTIVE_STATES,
    DomainReport,
    DomainSpec,
    DomainUsage,
    DriverError,
    HostReport,
    Hypervisor,
)
from hosts.driver.libvirt.connection import call, lookup_domain, translate
from hosts.driver.libvirt.guests import with_devices
from hosts.driver.libvirt.storage import pool_markers
from hosts.driver.libvirt.volumes import pool_space, running_pool

POWER_STATES = {
    libvirt.VIR_DOMAIN_NOSTATE: "nostate",
    libvirt.VIR_DOMAIN_RUNNING: "running",
    libvirt.VIR_DOMAIN_BLOCKED: "blocked",
    libvirt.VIR_DOMAIN_PAUSED: "paused",
    libvirt.VIR_DOMAIN_SHUTDOWN: "shutdown",
    libvirt.VIR_DOMAIN_SHUTOFF: "shutoff",
    libvirt.VIR_DOMAIN_CRASHED: "crashed",
    libvirt.VIR_DOMAIN_PMSUSPENDED: "pmsuspended",
}
# Undefine with the snapshots' metadata (the disks stay, as libvirt leaves them).
UNDEFINE_FLAGS = libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA

CORRAL_XMLNS = "https://corral.invalid/xmlns/vm/1"
QEMU_XMLNS = "http://libvirt.org/schemas/domain/qemu/1.0"
FORWARDED_NETDEV = "corralnet0"
FORWARDED_NIC_SLOT = "0x10"
_HOSTFWD = re.compile(r"hostfwd=tcp:[0-9.]*:\d+-:22")
IMAGE_DIR = "/var/lib/libvirt/images"


def _cpu_times(conn: libvirt.virConnect) -> tuple[int, int] | None:
    """The host's busy and total CPU time (user + kernel, and that plus idle and iowait)."""
    try:
        times = conn.getCPUStats(libvirt.VIR_NODE_CPU_STATS_ALL_CPUS)
    except libvirt.libvirtError:
        return None  # the driver has no counters
    busy = times.get("user", 0) + times.get("kernel", 0)
    total = busy + times.get("idle", 0) + times.get("iowait", 0)
    return (busy, total) if total else None


def domain_xml(spec: DomainSpec, hypervisor: str) -> str:
    """Domain XML for ``spec``. ``hypervisor`` is the connection type (``QEMU``, ``TEST``…):
    the domain's type when the spec names none (``kvm`` for QEMU)."""
    domain_type = spec.domain_type or {"QEMU": "kvm"}.get(hypervisor.upper(), hypervisor.lower())
    title = f"<title>{escape(spec.title)}</title>" if spec.title else ""
    forwarded = _forwarded_nic(spec)
    namespace = f" xmlns:qemu={quoteattr(QEMU_XMLNS)}" if forwarded else ""
    return (
        f"<domain type={quoteattr(domain_type)}{namespace}>"
        f"<name>{escape(spec.name)}</name>{title}"
        f"<uuid>{escape(spec.uuid)}</uuid>"
        f"<memory unit='MiB'>{int(spec.memory_mb)}</memory>"
        f"<vcpu>{int(spec.vcpus)}</vcpu>"
        f"<metadata><corral:vm xmlns:corral={quoteattr(CORRAL_XMLNS)} "
        f"os={quoteattr(spec.os_type)} disk_gb='{int(spec.disk_gb)}'/></metadata>"
        f"{_os_xml(spec)}"
        "<features><acpi/></features>"
        "<devices>"
        f"{_emulator_xml(spec)}{_disk_xml(spec)}{_interfaces_xml(spec)}{BALLOON}"
        f"</devices>{forwarded}</domain>"
    )


# The guest's balloon driver reports its memory figures every 10 s (what libvirt's balloon
# group then gives: ``available``, ``usable``…), which a VM's "memory used" is read from.
BALLOON_STATS_PERIOD_S = 10
BALLOON = f"<memballoon model='virtio'><stats period='{BALLOON_STATS_PERIOD_S}'/></memballoon>"


def _os_xml(spec: DomainSpec) -> str:
    machine = f" machine={quoteattr(spec.machine)}" if spec.machine else ""
    if not spec.kernel:
        return f"<os><type arch='x86_64'{machine}>hvm</type><boot dev='hd'/></os>"
    initrd = f"<initrd>{escape(spec.initrd)}</initrd>" if spec.initrd else ""
    cmdline = f"<cmdline>{escape(spec.cmdline)}</cmdline>" if spec.cmdline else ""
    return (
        f"<os><type arch='x86_64'{machine}>hvm</type>"
        f"<kernel>{escape(spec.kernel)}</kernel>{initrd}{cmdline}</os>"
    )


def _emulator_xml(spec: DomainSpec) -> str:
    return f"<emulator>{escape(spec.emulator)}</emulator>" if spec.emulator else ""


def _disk_xml(spec: DomainSpec) -> str:
    path = spec.disk_path or f"{IMAGE_DIR}/{spec.uuid}.qcow2"
    return (
        "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        f"<source file={quoteattr(path)}/><target dev='vda' bus='virtio'/></disk>"
    )


def _interfaces_xml(spec: DomainSpec) -> str:
    """A NIC on each named network and on the bridge; a user-mode NIC when the VM asks for a
    network-less one (a host with neither, such as a session daemon), so DHCP still answers.
    A user-mode NIC that forwards SSH is QEMU's own (``_forwarded_nic``)."""
    interfaces = "".join(
        f"<interface type='network'><source network={quoteattr(net)}/>"
        f"<model type='virtio'/></interface>"
        for net in spec.networks
    )
    if spec.bridge:
        interfaces += (
            f"<interface type='bridge'><source bridge={quoteattr(spec.bridge)}/>"
            "<model type='virtio'/></interface>"
        )
    if _user_nic(spec) and spec.ssh_forward_port is None:
        interfaces += "<interface type='user'><model type='virtio'/></interface>"
    return interfaces


def _user_nic(spec: DomainSpec) -> bool:
    return spec.user_nic and not spec.networks and not spec.bridge


def _forwarded_nic(spec: DomainSpec) -> str:
    """A user-mode NIC whose guest port 22 is published on the host at ``ssh_forward_port``
    (on ``ssh_forward_listen``): QEMU's ``hostfwd``, given through libvirt's QEMU namespace
    (Debian's libvirt 9.0 has no ``<portForward>``), at a PCI address of its own (libvirt's
    automatic addresses would clash with it). libvirt marks such a domain tainted."""
    port = spec.ssh_forward_port
    if port is None or not _user_nic(spec):
        return ""
    netdev = f"user,id={FORWARDED_NETDEV},{_hostfwd(spec.ssh_forward_listen, port)}"
    device = f"virtio-net-pci,netdev={FORWARDED_NETDEV},addr={FORWARDED_NIC_SLOT}"
    args = "".join(
        f"<qemu:arg value={quoteattr(value)}/>" for value in ("-netdev", netdev, "-device", device)
    )
    return f"<qemu:commandline>{args}</qemu:commandline>"


def _hostfwd(listen: str, port: int) -> str:
    ipaddress.IPv4Address(listen)  # an address, never text that could add QEMU options
    return f"hostfwd=tcp:{listen}:{int(port)}-:22"


def with_forwarded_ssh_port(xml: str, port: int, listen: str = "127.0.0.1") -> str:
    """``xml`` forwarding ``port`` on ``listen`` instead (a migration's destination has ports,
    and maybe an address to listen on, of its own)."""
    return _HOSTFWD.sub(_hostfwd(listen, port), xml)


# What each open connection's host names as its hypervisor: read once per connection, not at
# every sync (its domain capabilities are about 9 KB); it changes only with the host's libvirt,
# whose restart ends the connection.
_hypervisors: weakref.WeakKeyDictionary[libvirt.virConnect, Hypervisor] = (
    weakref.WeakKeyDictionary()
)


def hypervisor(conn: libvirt.virConnect) -> Hypervisor | None:
    """What the host's domain capabilities name (None for hosts without them)."""
    try:
        return _hypervisors[conn]
    except KeyError:
        pass
    try:
        caps = ElementTree.fromstring(conn.getDomainCapabilities(None, "x86_64", None, None, 0))
    except libvirt.libvirtError:
        return None  # no x86_64 emulator: the host is reported without one (asked again)
    found = Hypervisor(
        domain_type=caps.findtext("domain") or "qemu",
        machine=caps.findtext("machine") or "pc",
        emulator=caps.findtext("path") or "",
    )
    _hypervisors[conn] = found
    return found


USAGE_STATS = (
    libvirt.VIR_DOMAIN_STATS_BALLOON
    | libvirt.VIR_DOMAIN_STATS_BLOCK
    | libvirt.VIR_DOMAIN_STATS_INTERFACE
)


def _summed(values: dict, group: str, counter: str) -> int | None:
    """A counter summed over a group's devices (``block.0.rd.bytes``…); None when no
    device gives it."""
    known = [
        values[key]
        for i in range(values.get(f"{group}.count", 0))
        if (key := f"{group}.{i}.{counter}") in values
    ]
    return sum(known) if known else None


def _memory_used_mb(balloon: dict) -> int | None:
    """What the guest uses (its balloon driver's view, caches left out), else the memory
    the domain's process holds on the host; KiB in."""
    if "available" in balloon and "usable" in balloon:
        return max(0, balloon["available"] - balloon["usable"]) // 1024
    if "rss" in balloon:
        return balloon["rss"] // 1024
    return None


def _usage(dom: libvirt.virDomain, values: dict) -> DomainUsage:
    if not any(key.startswith(("balloon.", "block.", "net.")) for key in values):
        return _usage_by_calls(dom)
    balloon = {k.removeprefix("balloon."): v for k, v in values.items() if k.startswith("balloon.")}
    return DomainUsage(
        cpu_time_ns=values.get("cpu.time"),
        memory_used_mb=_memory_used_mb(balloon),
        disk_read_bytes=_summed(values, "block", "rd.bytes"),
        disk_written_bytes=_summed(values, "block", "wr.bytes"),
        net_rx_bytes=_summed(values, "net", "rx.bytes"),
        net_tx_bytes=_summed(values, "net", "tx.bytes"),
    )


def _usage_by_calls(dom: libvirt.virDomain) -> DomainUsage:
    """The same counters asked one call each, from a driver whose domain stats give only the
    state (libvirt's test driver): what it answers."""
    try:
        domain = ElementTree.fromstring(dom.XMLDesc())
        disks = [t.get("dev") for t in domain.findall("devices/disk/target")]
        nics = [t.get("dev") for t in domain.findall("devices/interface/target")]
        blocks = [dom.blockStats(dev) for dev in disks if dev]
        nets = [dom.interfaceStats(dev) for dev in nics if dev]
        return DomainUsage(
            cpu_time_ns=dom.info()[4],
            memory_used_mb=_memory_used_mb(dom.memoryStats()),
            disk_read_bytes=sum(b[1] for b in blocks) if blocks else None,
            disk_written_bytes=sum(b[3] for b in blocks) if blocks else None,
            net_rx_bytes=sum(n[0] for n in nets) if nets else None,
            net_tx_bytes=sum(n[4] for n in nets) if nets else None,
        )
    except libvirt.libvirtError:
        return DomainUsage()


def host_report(
    uri: str,
    storage_pool: str = "",
    storage_path: str = "",
    storage_marker: str = "",
    *,
    capabilities: bool = True,
    usage: bool = False,
) -> HostReport:
    """Capacity, CPU counters, the raw power state and CPU time of every domain (one
    ``getAllDomainStats`` call; with ``usage``, the running domains' memory, disk and network
    counters in the same call), the storage pool's space and the hypervisor. With
    ``storage_path``, a missing pool is made there (a directory pool); without, a missing pool
    reports no storage. With ``storage_marker``, the host's mark is put in its pool and the
    marks there read (``storage.pool_markers``: which hosts share the pool's folder). Without
    ``capabilities`` (a host known to have none) the hypervisor is not asked for."""

    def read(conn: libvirt.virConnect) -> HostReport:
        read_at = datetime.now(UTC)
        model, memory_mb, cpus, *_ = conn.getInfo()
        stats = conn.getAllDomainStats(
            libvirt.VIR_DOMAIN_STATS_STATE
            | libvirt.VIR_DOMAIN_STATS_CPU_TOTAL
            | (USAGE_STATS if usage else 0)
        )
        domains = []
        for dom, values in stats:
            state = POWER_STATES.get(values.get("state.state"), "nostate")
            domains.append(
                DomainReport(
                    uuid=dom.UUIDString(),
                    name=dom.name(),
                    power_state=state,
                    cpu_time_ns=values.get("cpu.time"),
                    usage=_usage(dom, values) if usage and state in ACTIVE_STATES else None,
                )
            )
        networks = sorted(net.name() for net in conn.listAllNetworks())
        storage = markers = None
        if storage_pool:
            if storage_path:
                with contextlib.suppress(libvirt.libvirtError):
                    running_pool(conn, storage_pool, storage_path)
            storage = pool_space(conn, storage_pool)
            if storage is not None and storage_marker:
                markers = pool_markers(conn, storage_pool, storage_marker)
        return HostReport(
            storage=storage,
            storage_markers=markers,
            hypervisor=hypervisor(conn) if capabilities else None,
            cpus=cpus,
            memory_mb=memory_mb,
            cpu_model=model,
            domains=domains,
            networks=networks,
            read_at=read_at,
            cpu_times_ns=_cpu_times(conn),
        )

    return call(uri, "read the host's domains", read, retry=True)


def _domain(conn: libvirt.virConnect, uuid: str) -> libvirt.virDomain:
    return conn.lookupByUUIDString(uuid)


def _state(dom: libvirt.virDomain) -> str:
    return POWER_STATES.get(dom.state()[0], "nostate")


def domain_power_state(uri: str, uuid: str) -> str | None:
    """The raw power state of one domain, or None when the host has no such domain."""

    def read(conn):
        dom = lookup_domain(conn, uuid)
        return None if dom is None else _state(dom)

    return call(uri, "read the VM's state", read, retry=True)


def define(uri: str, spec: DomainSpec) -> None:
    """Define (or redefine) the domain for ``spec``; its UUID stays the VM's UUID."""

    def run(conn):
        try:
            clash = conn.lookupByName(spec.name)
        except libvirt.libvirtError:
            clash = None
        if clash is not None and clash.UUIDString() != spec.uuid:
            raise DriverError(f"The host already has another domain named {spec.name!r}.", uri=uri)
        if not spec.domain_type:
            found = hypervisor(conn)
            if found is not None:
                spec_to_define = replace(
                    spec,
                    domain_type=found.domain_type,
                    machine=found.machine,
                    emulator=found.emulator,
                )
                xml = domain_xml(spec_to_define, conn.getType())
                conn.defineXML(with_devices(xml, conn, spec.uuid, spec.guest))
                return
        xml = domain_xml(spec, conn.getType())
        conn.defineXML(with_devices(xml, conn, spec.uuid, spec.guest))

    call(uri, "define the VM", run)


def start(uri: str, uuid: str) -> None:
    """Start the domain; a running domain is left as it is."""

    def run(conn):
        dom = _domain(conn, uuid)
        if _state(dom) not in ACTIVE_STATES:
            dom.create()

    call(uri, "start the VM", run)


def shutdown(uri: str, uuid: str) -> None:
    """Ask the guest to shut down (ACPI); the caller waits for the domain to stop."""

    def run(conn):
        dom = _domain(conn, uuid)
        if _state(dom) in ACTIVE_STATES:
            dom.shutdown()

    call(uri, "shut the VM down", run)


def power_off(uri: str, uuid: str) -> None:
    """Stop the domain at once, like pulling the plug."""

    def run(conn):
        dom = _domain(conn, uuid)
        if _state(dom) in ACTIVE_STATES:
            dom.destroy()

    call(uri, "power the VM off", run)


def suspend(uri: str, uuid: str) -> None:
    call(uri, "suspend the VM", lambda conn: _domain(conn, uuid).suspend())


def resume(uri: str, uuid: str) -> None:
    call(uri, "resume the VM", lambda conn: _domain(conn, uuid).resume())


def undefine(uri: str, uuid: str) -> None:
    """Remove the domain (stopping it first) with its snapshot metadata; gone already is fine."""

    def run(conn):
        dom = lookup_domain(conn, uuid)
        if dom is None:
            return
        if _state(dom) in ACTIVE_STATES:
            dom.destroy()
        dom.undefineFlags(UNDEFINE_FLAGS)

    call(uri, "remove the VM from the host", run)


def snapshot_create(uri: str, uuid: str, name: str) -> None:
    """Take snapshot ``name`` (replacing one of that name)."""

    def run(conn):
        dom = _domain(conn, uuid)
        try:
            dom.snapshotLookupByName(name).delete(0)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT:
                raise
        dom.snapshotCreateXML(f"<domainsnapshot><name>{escape(name)}</name></domainsnapshot>", 0)

    call(uri, "take a snapshot", run)


def has_snapshot(uri: str, uuid: str, name: str) -> bool:
    def read(conn):
        return name in _domain(conn, uuid).snapshotListNames()

    return call(uri, "list the VM's snapshots", read, retry=True)


def snapshot_revert(uri: str, uuid: str, name: str) -> None:
    def run(conn):
        dom = _domain(conn, uuid)
        dom.revertToSnapshot(dom.snapshotLookupByName(name))

    call(uri, "revert to the snapshot", run)


def take_snapshot(uri: str, uuid: str, name: str) -> int | None:
    """Take snapshot ``name`` of the domain inside its disk (libvirt's internal snapshot: of a
    running domain, its memory and running state too, for libvirt takes an internal snapshot
    of a running domain only with them). Returns what it added to the disk on the host, in
    bytes (None where the host does not say)."""

    def run(conn):
        dom = _domain(conn, uuid)
        before = _disk_bytes(dom)
        description = "Taken by Corral"
        dom.snapshotCreateXML(
            f"<domainsnapshot><name>{escape(name)}</name>"
            f"<description>{escape(description)}</description></domainsnapshot>",
            0,
        )
        after = _disk_bytes(dom)
        if before is None or after is None:
            return None
        return max(0, after - before)

    return call(uri, "take a snapshot", run)


def _disk_bytes(dom: libvirt.virDomain) -> int | None:
    """The bytes the domain's first disk takes on its host (its file's size), or None."""
    target = ElementTree.fromstring(dom.XMLDesc(0)).find("./devices/disk[@device='disk']/target")
    if target is None:
        return None
    try:
        return dom.blockInfo(target.get("dev"))[2]
    except libvirt.libvirtError:
        return None  # the test driver keeps no disks


def revert_to_snapshot(uri: str, uuid: str, name: str, *, with_memory: bool) -> None:
    """Bring the domain back to snapshot ``name``: its disk, and with ``with_memory`` its
    memory and running state (a domain snapshotted running runs again where it was). Without,
    the domain ends shut off with the snapshot's disk, whatever it was doing then or now."""

    def run(conn):
        dom = _domain(conn, uuid)
        snapshot = dom.snapshotLookupByName(name)
        if with_memory:
            dom.revertToSnapshot(snapshot, libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_FORCE)
            return
        dom.revertToSnapshot(
            snapshot,
            libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED | libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_FORCE,
        )
        if _state(dom) in ACTIVE_STATES:
            dom.destroy()

    call(uri, "revert to the snapshot", run)


def delete_snapshot(uri: str, uuid: str, name: str) -> bool:
    """Delete snapshot ``name`` from the domain's disk (what it alone held goes; the disk as it
    is now stays). False when the host has no such snapshot (or no such domain)."""

    def run(conn):
        dom = lookup_domain(conn, uuid)
        if dom is None:
            return False
        try:
            dom.snapshotLookupByName(name).delete(0)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT:
                return False
            raise
        return True

    return call(uri, "delete the snapshot", run)


def migrate(source_uri: str, destination_uri: str, uuid: str, address: str = "") -> None:
    """Move the domain to another host, keeping its UUID, state and snapshots: libvirt's live
    migration (``migrate3``), persistent on the destination, undefined on the source; its
    stream goes to ``address`` (``migration_params``)."""
    source = call(source_uri, "connect for migration", lambda conn: conn, retry=True)
    destination = call(destination_uri, "connect for migration", lambda conn: conn, retry=True)
    params = migration_params(address)
    try:
        flags = (
            libvirt.VIR_MIGRATE_LIVE
            | libvirt.VIR_MIGRATE_PERSIST_DEST
            | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
        )
        _domain(source, uuid).migrate3(destination, params, flags)
    except libvirt.libvirtError as exc:
        raise translate(
            source_uri, exc, "migrate the VM", source, others=[(destination_uri, destination)]
        ) from exc


def migration_params(address: str) -> dict:
    """The ``migrate3`` parameter sending the migration stream to ``address`` (the
    destination's migration address: ``tcp://ADDRESS``), where the destination listens on all
    its addresses unless its ``qemu.conf`` names one; libvirt sends a disk copy's stream (its
    NBD server on the destination) to the same host. None for "": libvirt's own choice, the
    name the destination gives for itself."""
    if not address:
        return {}
    try:
        return {libvirt.VIR_MIGRATE_PARAM_URI: uris.migration_uri(address)}
    except uris.Refusal as exc:
        raise DriverError(
            "Corral does not send a migration to this address.", detail=str(exc)
        ) from exc

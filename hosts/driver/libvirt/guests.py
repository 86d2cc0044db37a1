"""Reaching a guest: its serial console log, cloud-init seed, guest agent channel and screen.

Files a guest needs on its host (the seed ``<uuid>-seed.iso``, the serial log ``<uuid>.log``)
live in the host's storage pool and are written and read as libvirt volumes (upload and
download streams), so a remote host works as a local one. A host without that pool (libvirt's
test driver) gets the devices that need no file: a serial console, the agent channel, VNC.
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from xml.etree import ElementTree
from xml.sax.saxutils import quoteattr

import libvirt

from hosts.driver.base import STORAGE_POOL, VNC_PASSWORD_LENGTH, GuestDevices, GuestInfo
from hosts.driver.libvirt import storage
from hosts.driver.libvirt.connection import call, lookup_domain
from hosts.driver.libvirt.storage import active_pool, storage_pool_path

logger = logging.getLogger(__name__)
AGENT_CHANNEL = "org.qemu.guest_agent.0"
LOG_TAIL_BYTES = 64 * 1024
LOOPBACK_NAMES = {"lo"}


def seed_volume(uuid: str) -> str:
    return f"{uuid}-seed.iso"


def log_volume(uuid: str) -> str:
    return f"{uuid}.log"


def export_volume(uuid: str) -> str:
    """The temporary copy of the guest's disk while an image is made of it (``exports``)."""
    return f"{uuid}-export.qcow2"


def devices_xml(conn: libvirt.virConnect, uuid: str, devices: GuestDevices) -> str:
    """The ``<devices>`` children for ``devices``, paths resolved in the host's pool."""
    pool = active_pool(conn, devices.storage_pool)
    folder = storage_pool_path(pool) if pool is not None else ""
    parts = []
    if folder and devices.seed:
        parts.append(
            # Optional: a guest whose seed was never written boots without one. Not in
            # snapshots: it is rewritten whenever the VM changes hands.
            "<disk type='file' device='cdrom' snapshot='no'><driver name='qemu' type='raw'/>"
            f"<source file={quoteattr(f'{folder}/{seed_volume(uuid)}')} startupPolicy='optional'/>"
            "<target dev='hdc' bus='ide'/><readonly/></disk>"
        )
    log = f"<log file={quoteattr(f'{folder}/{log_volume(uuid)}')} append='on'/>" if folder else ""
    parts.append(f"<serial type='pty'>{log}<target port='0'/></serial>")
    parts.append("<console type='pty'><target type='serial' port='0'/></console>")
    if devices.guest_agent:
        parts.append(
            f"<channel type='unix'><target type='virtio' name='{AGENT_CHANNEL}'/></channel>"
        )
    if devices.graphics == "vnc":
        # Locked from the start: a password nobody is told, until a console is opened
        # (``set_screen_password``). VNC passwords are at most 8 characters.
        locked = secrets.token_urlsafe(6)[:VNC_PASSWORD_LENGTH]
        parts.append(
            f"<graphics type='vnc' autoport='yes' listen={quoteattr(devices.graphics_listen)}"
            f" passwd={quoteattr(locked)}/>"
        )
    return "".join(parts)


def with_devices(xml: str, conn: libvirt.virConnect, uuid: str, devices: GuestDevices) -> str:
    """``xml`` (a domain definition) with the guest devices added inside ``<devices>``."""
    head, sep, tail = xml.rpartition("</devices>")
    if not sep:
        return xml
    return f"{head}{devices_xml(conn, uuid, devices)}{sep}{tail}"


def write_seed(uri: str, uuid: str, data: bytes, pool_name: str = STORAGE_POOL) -> bool:
    """Put ``data`` (a NoCloud ISO) in the host's pool as the guest's seed volume, replacing it.

    False when the host has no such pool (nothing written). A running guest keeps reading the
    seed it booted with; its next boot reads this one.
    """
    return call(
        uri,
        "write the VM's cloud-init seed",
        lambda conn: _write_volume(conn, pool_name, seed_volume(uuid), data),
    )


def carry_log(
    source_uri: str, destination_uri: str, uuid: str, source_pool: str, destination_pool: str
) -> int:
    """Copy the tail of the guest's serial log (``LOG_TAIL_BYTES``) to the destination's pool
    ahead of a migration, where the guest's log goes on (appended); the bytes copied."""
    data = call(
        source_uri, "read the VM's console log", lambda conn: _log_tail(conn, source_pool, uuid)
    )
    if not data:
        return 0
    call(
        destination_uri,
        "copy the VM's console log",
        lambda conn: _write_volume(conn, destination_pool, log_volume(uuid), data),
    )
    return len(data)


def recent_output(uri: str, uuid: str, pool_name: str, size: int = 2048) -> bytes:
    """The last lines the guest wrote on its serial console (at most ``size`` bytes, from its
    first whole line), read from its log: what a terminal shows when it opens. b"" when the
    host keeps no log."""
    data = call(
        uri,
        "read the VM's console log",
        lambda conn: _log_tail(conn, pool_name, uuid, size),
        retry=True,
    )
    if len(data) >= size and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]
    return data


def _log_tail(
    conn: libvirt.virConnect, pool_name: str, uuid: str, size: int = LOG_TAIL_BYTES
) -> bytes:
    pool = active_pool(conn, pool_name)
    if pool is None:
        return b""
    volume = _log_volume(pool, uuid)
    if volume is None:  # QEMU made the file outside libvirt: rescan the pool only then
        storage.refresh(pool)
        volume = _log_volume(pool, uuid)
    if volume is None:
        return b""
    total = volume.info()[1]  # the volume's size read afresh
    start = max(0, total - size)
    return _download(conn, volume, start, total - start) if total else b""


def _log_volume(pool: libvirt.virStoragePool, uuid: str) -> libvirt.virStorageVol | None:
    try:
        return pool.storageVolLookupByName(log_volume(uuid))
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
            return None
        raise


def _write_volume(conn: libvirt.virConnect, pool_name: str, name: str, data: bytes) -> bool:
    """A raw volume ``name`` holding ``data``, replacing one of that name; False without the
    pool."""
    pool = active_pool(conn, pool_name)
    if pool is None:
        return False
    storage.refresh(pool)
    try:
        pool.storageVolLookupByName(name).delete(0)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
            raise
    volume = pool.createXML(
        f"<volume><name>{name}</name><capacity unit='bytes'>{len(data)}</capacity>"
        "<target><format type='raw'/></target></volume>",
        0,
    )
    stream = conn.newStream(0)
    volume.upload(stream, 0, len(data), 0)
    sent = {"offset": 0}

    def source(_stream, size, state):
        chunk = data[state["offset"] : state["offset"] + size]
        state["offset"] += len(chunk)
        return chunk

    stream.sendAll(source, sent)
    stream.finish()
    return True


def read_volume(uri: str, name: str, pool_name: str = STORAGE_POOL) -> bytes | None:
    """A whole (small) volume of the pool, or None when there is none."""

    def run(conn):
        pool = active_pool(conn, pool_name)
        if pool is None:
            return None
        storage.refresh(pool)
        try:
            volume = pool.storageVolLookupByName(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                return None
            raise
        return _download(conn, volume, 0, volume.info()[1])

    return call(uri, "read a volume", run, retry=True)


def remove_guest_files(uri: str, uuid: str, pool_name: str = STORAGE_POOL) -> None:
    """Delete the guest's seed and serial log from the pool (and a copy of its disk an image
    job cut short left there); missing ones are fine."""

    def run(conn):
        pool = active_pool(conn, pool_name)
        if pool is None:
            return
        storage.refresh(pool)
        for name in (seed_volume(uuid), log_volume(uuid), export_volume(uuid)):
            try:
                pool.storageVolLookupByName(name).delete(0)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
                    raise

    call(uri, "remove the VM's seed and console log", run)


def _download(conn, volume, offset: int, length: int) -> bytes:
    if length <= 0:
        return b""
    stream = conn.newStream(0)
    volume.download(stream, offset, length, 0)
    received: list[bytes] = []

    def sink(_stream, chunk, acc):
        acc.append(chunk)
        return len(chunk)

    stream.recvAll(sink, received)
    stream.finish()
    return b"".join(received)


def _addresses(dom: libvirt.virDomain, agent: bool) -> list[str]:
    """The guest's addresses: from its agent when it has one, else libvirt networks' leases."""
    sources = [libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT] if agent else []
    sources.append(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE)
    for source in sources:
        try:
            interfaces = dom.interfaceAddresses(source, 0)
        except libvirt.libvirtError:
            continue  # agent not up yet, no channel, or no such source on this host
        found = [
            address["addr"]
            for name, info in sorted(interfaces.items())
            if name not in LOOPBACK_NAMES
            for address in info.get("addrs") or []
            if address.get("addr") and not address["addr"].startswith(("127.", "::1", "fe80:"))
        ]
        if found:
            return found
    return []


def _graphics(dom: libvirt.virDomain) -> tuple[int | None, str]:
    graphics = ElementTree.fromstring(dom.XMLDesc(0)).find("devices/graphics[@type='vnc']")
    if graphics is None:
        return None, ""
    port = int(graphics.get("port") or -1)
    return (port if port > 0 else None), graphics.get("listen") or ""


def screen_port(uri: str, uuid: str) -> int | None:
    """The VNC port of the running domain's screen on the host (None: no screen, or the
    domain is not running there)."""

    def run(conn: libvirt.virConnect) -> int | None:
        dom = lookup_domain(conn, uuid)
        return _graphics(dom)[0] if dom is not None and dom.isActive() else None

    return call(uri, "read the guest's screen", run, retry=True)


def set_screen_password(uri: str, uuid: str, password: str, valid_until: datetime) -> int | None:
    """Let ``password`` open the running domain's screen until ``valid_until`` (the password it
    had stops working at once; a connection already open stays); returns the screen's VNC port.
    None when the domain has no screen or does not run there."""
    when = valid_until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")

    def run(conn: libvirt.virConnect) -> int | None:
        dom = lookup_domain(conn, uuid)
        if dom is None or not dom.isActive():
            return None
        xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE)
        graphics = ElementTree.fromstring(xml).find("devices/graphics[@type='vnc']")
        if graphics is None:
            return None
        port = int(graphics.get("port") or -1)
        if graphics.get("passwd") is None:
            # Started without a password (defined by an earlier Corral): QEMU enables VNC
            # passwords only at start, so it stays open until its next start locks it.
            logger.warning(
                "The screen of domain %s on %s has no password until it restarts", uuid, uri
            )
            return port if port > 0 else None
        graphics.set("passwd", password[:VNC_PASSWORD_LENGTH])
        graphics.set("passwdValidTo", when)
        dom.updateDeviceFlags(
            ElementTree.tostring(graphics, encoding="unicode"), libvirt.VIR_DOMAIN_AFFECT_LIVE
        )
        return port if port > 0 else None

    return call(uri, "open the guest's screen", run)


def guest_info(
    uri: str, wanted: dict[str, tuple[bool, int]], pool_name: str = STORAGE_POOL
) -> dict[str, GuestInfo]:
    """For each running domain in ``wanted`` (uuid -> (has an agent, log size known)): its
    addresses, graphics port, and its serial log's tail when the log grew or shrank."""

    def run(conn: libvirt.virConnect) -> dict[str, GuestInfo]:
        pool = active_pool(conn, pool_name)
        if pool is not None:
            storage.refresh(pool)
        found: dict[str, GuestInfo] = {}
        for uuid, (agent, known_size) in wanted.items():
            dom = lookup_domain(conn, uuid)
            if dom is None:
                continue
            info = GuestInfo()
            if dom.isActive():
                info.addresses = _addresses(dom, agent)
                info.graphics_port, info.graphics_listen = _graphics(dom)
            if pool is not None:
                _read_log(conn, pool, uuid, known_size, info)
            found[uuid] = info
        return found

    return call(uri, "read what the guests show", run, retry=True)


def _read_log(conn, pool, uuid: str, known_size: int, info: GuestInfo) -> None:
    try:
        volume = pool.storageVolLookupByName(log_volume(uuid))
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
            return
        raise
    size = volume.info()[1]
    info.log_size = size
    if size != known_size:
        start = max(0, size - LOG_TAIL_BYTES)
        info.log_tail = _download(conn, volume, start, size - start)


def set_authorized_keys(uri: str, uuid: str, user: str, keys: list[str]) -> None:
    """Make ``keys`` the whole of ``user``'s ``~/.ssh/authorized_keys`` in the running guest,
    through its guest agent (qemu-ga's ``guest-ssh-add-authorized-keys`` with reset, or
    ``guest-ssh-remove-authorized-keys`` of every key when there are none).
    ``GuestAgentUnavailable`` when the agent does not answer."""

    def run(conn: libvirt.virConnect) -> None:
        dom = conn.lookupByUUIDString(uuid)
        if keys:
            dom.authorizedSSHKeysSet(user, keys, 0)
            return
        present = dom.authorizedSSHKeysGet(user, 0)
        if present:
            dom.authorizedSSHKeysSet(
                user, present, libvirt.VIR_DOMAIN_AUTHORIZED_SSH_KEYS_SET_REMOVE
            )

    call(uri, f"put SSH keys in the guest's account {user}", run)

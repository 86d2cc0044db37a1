"""The host driver backend of light simulated hosts (``lab/lightsim/server.py``): a
``HostDriver`` that sends JSON lines over a Unix socket instead of calling libvirt, for the
calls the sync and the basic VM operations make. Snapshots, migration, storage and what
reaches a guest (seeds, console logs, screens, consoles, agents) are not simulated: those
calls raise ``NotSupported``.

The lab registers it for the scheme ``lightsim+unix`` with ``check`` as the allowlist of its
URIs (``lightsim+unix:///NAME?socket=/path/to/socket``, the socket under a folder the lab
allows). One connection per thread and socket, kept open and reopened once after a failure.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from hosts.driver import uris
from hosts.driver.base import (
    STORAGE_POOL,
    DomainNotFound,
    DomainReport,
    DriverError,
    GuestInfo,
    HostReport,
    HostUnreachable,
    NotSupported,
    PoolSpace,
    check_uri,
)

SCHEME = "lightsim+unix"
TIMEOUT_S = 30

# Folders whose Unix sockets light simulated hosts may be reached on (``allow_folder``).
FOLDERS: list[str] = []
_URI = re.compile(r"lightsim\+unix:///(?P<name>[^?]*)\?socket=(?P<socket>[^&;=?]*)")
URI_SHAPE = (
    "A light simulated host's URI is lightsim+unix:///NAME?socket=/path/to/socket, nothing more."
)

_local = threading.local()


def allow_folder(folder: str) -> None:
    """Accept light simulated hosts whose socket lies under ``folder``."""
    folder = folder.rstrip("/")
    if folder and folder not in FOLDERS:
        FOLDERS.append(folder)
        uris.refusal.cache_clear()


def check(uri: str) -> None:
    """``lightsim+unix:///NAME?socket=PATH``: a plain host name and a socket path under an
    allowed folder; no other part. Nothing in it names a program: the driver only connects
    to the socket and exchanges JSON lines."""
    match = _URI.fullmatch(uri)
    if match is None:
        raise uris.Refusal(URI_SHAPE)
    uris.plain_name("a light simulated host's name", match["name"])
    path = match["socket"]
    uris.file_path("socket", path)
    if ".." in path.split("/"):
        raise uris.Refusal("The socket path may not hold '..'.")
    if not any(path.startswith(folder + "/") for folder in FOLDERS):
        raise uris.Refusal(
            "A light simulated host's socket must lie under the simulated hosts' folder "
            "(CORRAL_SIMHOSTS_DIR)."
        )


def handles(uri: str) -> bool:
    return uri.startswith(f"{SCHEME}://")


def _address(uri: str) -> tuple[str, str]:
    check_uri(uri)
    parts = urlsplit(uri)
    return parts.path.lstrip("/"), parse_qs(parts.query)["socket"][0]


def _connection(path: str) -> tuple[socket.socket, object]:
    connections = _local.__dict__.setdefault("connections", {})
    current = connections.get(path)
    if current is not None and current[2] == os.getpid():
        return current[0], current[1]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT_S)
    sock.connect(path)
    connections[path] = (sock, sock.makefile("rb"), os.getpid())
    return sock, connections[path][1]


def _forget(path: str) -> None:
    current = _local.__dict__.get("connections", {}).pop(path, None)
    if current is not None and current[2] == os.getpid():
        current[0].close()


def request(uri: str, op: str, what: str, **values) -> dict:
    """Send one request for the host of ``uri``; its answer, or a DriverError."""
    name, path = _address(uri)
    line = json.dumps({"op": op, "host": name, "client": os.getpid(), **values}).encode()
    for attempt in range(2):
        try:
            sock, reader = _connection(path)
            sock.sendall(line + b"\n")
            answer = reader.readline()
            if not answer:
                raise ConnectionError("the simulator closed the connection")
            break
        except OSError as exc:
            _forget(path)
            if attempt:
                raise HostUnreachable(
                    "The host does not answer.", uri=uri, detail=f"{uri}: {exc}"
                ) from exc
    reply = json.loads(answer)
    if reply.get("ok"):
        return reply
    detail = f"{uri}: {reply.get('message', '')}"
    if reply.get("error") == "no_host":
        raise HostUnreachable("The host does not answer.", uri=uri, detail=detail)
    if reply.get("error") == "no_domain":
        raise DomainNotFound(f"Could not {what}: the host has no such VM.", uri=uri, detail=detail)
    raise DriverError(f"Could not {what}: the host refused it.", uri=uri, detail=detail)


def host_report(
    uri: str,
    storage_pool: str = "",
    storage_path: str = "",
    storage_marker: str = "",
    *,
    usage: bool = False,
) -> HostReport:
    """The simulator's report: power states only (its domains have no counters)."""
    read_at = datetime.now(UTC)
    reply = request(uri, "report", "read the host's domains")
    return HostReport(
        cpus=reply["cpus"],
        memory_mb=reply["memory_mb"],
        cpu_model=reply["cpu_model"],
        domains=[DomainReport(uuid=u, name=n, power_state=s) for u, n, s in reply["domains"]],
        networks=sorted(reply["networks"]),
        read_at=read_at,
    )


def domain_power_state(uri: str, uuid: str) -> str | None:
    return request(uri, "state", "read the VM's state", uuid=uuid)["state"]


def define(uri: str, spec) -> None:
    request(uri, "define", "define the VM", uuid=spec.uuid, name=spec.name, title=spec.title)


def start(uri: str, uuid: str) -> None:
    request(uri, "start", "start the VM", uuid=uuid)


def shutdown(uri: str, uuid: str) -> None:
    request(uri, "shutdown", "shut the VM down", uuid=uuid)


def power_off(uri: str, uuid: str) -> None:
    request(uri, "power_off", "power the VM off", uuid=uuid)


def suspend(uri: str, uuid: str) -> None:
    request(uri, "suspend", "suspend the VM", uuid=uuid)


def resume(uri: str, uuid: str) -> None:
    request(uri, "resume", "resume the VM", uuid=uuid)


def undefine(uri: str, uuid: str) -> None:
    request(uri, "undefine", "remove the VM from the host", uuid=uuid)


def _no_snapshots(uri: str) -> NotSupported:
    return NotSupported("The light simulated host keeps no snapshots.", uri=uri, detail=uri)


def snapshot_create(uri: str, uuid: str, name: str) -> None:
    raise _no_snapshots(uri)


def has_snapshot(uri: str, uuid: str, name: str) -> bool:
    raise _no_snapshots(uri)


def snapshot_revert(uri: str, uuid: str, name: str) -> None:
    raise _no_snapshots(uri)


def take_snapshot(uri: str, uuid: str, name: str) -> int | None:
    raise _no_snapshots(uri)


def revert_to_snapshot(uri: str, uuid: str, name: str, *, with_memory: bool) -> None:
    raise _no_snapshots(uri)


def delete_snapshot(uri: str, uuid: str, name: str) -> bool:
    raise _no_snapshots(uri)


def migrate(source_uri: str, destination_uri: str, uuid: str, address: str = "") -> None:
    raise NotSupported(
        "The light simulated host cannot migrate.", uri=source_uri, detail=source_uri
    )


def _without_libvirt(uri: str) -> NotSupported:
    return NotSupported(
        "The host is served without libvirt: it has no guest consoles or agents to reach.",
        uri=uri,
        detail=f"{uri} is served by another host driver than libvirt",
    )


def keeps_disks(uri: str) -> bool:
    raise _without_libvirt(uri)


def ensure_pool(uri: str, pool: str, path: str = "") -> PoolSpace:
    raise _without_libvirt(uri)


def upload_image(
    uri: str, pool: str, pool_path: str, name: str, fmt: str, source: str, sha256: str
) -> str:
    raise _without_libvirt(uri)


def volume_path(uri: str, pool: str, name: str) -> str | None:
    raise _without_libvirt(uri)


def create_disk(uri: str, pool: str, name: str, size: int, backing=None, *, replace=False) -> str:
    raise _without_libvirt(uri)


def delete_volume(uri: str, pool: str, name: str) -> bool:
    raise _without_libvirt(uri)


def sees_same_storage(
    source_uri: str, source_pool: str, destination_uri: str, destination_pool: str
) -> bool:
    raise _without_libvirt(source_uri)


def export_disk(
    uri: str, uuid: str, pool: str, volume: str, target: str, *, quiesce: bool, limit: int
):
    raise NotSupported(
        "The light simulated host keeps no disks to make an image of.", uri=uri, detail=uri
    )


def write_seed(uri: str, uuid: str, data: bytes, pool: str = STORAGE_POOL) -> bool:
    raise _without_libvirt(uri)


def remove_guest_files(uri: str, uuid: str, pool: str = STORAGE_POOL) -> None:
    raise _without_libvirt(uri)


def carry_log(
    source_uri: str, destination_uri: str, uuid: str, source_pool: str, destination_pool: str
) -> int:
    raise _without_libvirt(source_uri)


def recent_output(uri: str, uuid: str, pool: str, size: int = 2048) -> bytes:
    raise _without_libvirt(uri)


def guest_info(uri: str, wanted: dict, pool: str = STORAGE_POOL) -> dict[str, GuestInfo]:
    raise _without_libvirt(uri)


def screen_port(uri: str, uuid: str) -> int | None:
    raise _without_libvirt(uri)


def set_screen_password(uri: str, uuid: str, password: str, valid_until) -> int | None:
    raise _without_libvirt(uri)


def set_authorized_keys(uri: str, uuid: str, user: str, keys: list[str]) -> None:
    raise _without_libvirt(uri)


def has_serial_consoles(uri: str) -> bool:
    return False


def open_serial_console(uri: str, uuid: str):
    raise _without_libvirt(uri)


def migrate_with_storage(
    source_uri: str,
    destination_uri: str,
    uuid: str,
    destination_boot: dict,
    address: str = "",
    copy_disk: bool = True,
) -> str:
    raise _without_libvirt(source_uri)


def move_stopped_with_storage(
    source_uri: str, destination_uri: str, uuid: str, destination_boot: dict, address: str = ""
) -> str:
    raise _without_libvirt(source_uri)


def control(uri: str, op: str, **values) -> dict:
    """A control request (``add``, ``set``, ``latency``, ``stats``) to the simulator serving
    ``uri``."""
    return request(uri, op, op, **values)

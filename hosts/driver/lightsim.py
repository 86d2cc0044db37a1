"""The driver side of light simulated hosts (``hosts/lightsim.py``): JSON lines over a Unix
socket instead of libvirt, for the calls the sync and the basic VM operations make.

A light host's URI is ``lightsim+unix:///NAME?socket=/path/to/socket`` (checked by
``hosts.driver.uris``: the socket must lie under a folder Corral allows). One connection per
thread and socket, kept open and reopened once after a failure.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from hosts.driver.connection import DomainNotFound, DriverError, HostUnreachable, UriRefused
from hosts.driver.uris import refusal

SCHEME = "lightsim+unix://"
TIMEOUT_S = 30

_local = threading.local()


def handles(uri: str) -> bool:
    return uri.startswith(SCHEME)


def _address(uri: str) -> tuple[str, str]:
    reason = refusal(uri)
    if reason is not None:
        raise UriRefused(f"Corral does not open this host's URI: {reason}", uri=uri)
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
                raise HostUnreachable(f"Cannot reach the host at {uri}: {exc}", uri=uri) from exc
    reply = json.loads(answer)
    if reply.get("ok"):
        return reply
    message = f"Could not {what}: {reply.get('message', '')}"
    if reply.get("error") == "no_host":
        raise HostUnreachable(f"Cannot reach the host at {uri}: {reply.get('message')}", uri=uri)
    if reply.get("error") == "no_domain":
        raise DomainNotFound(message, uri=uri)
    raise DriverError(message, uri=uri)


def host_report(uri: str):
    from hosts.driver.domains import DomainReport, HostReport

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


def power(uri: str, op: str, uuid: str, what: str) -> None:
    request(uri, op, what, uuid=uuid)


def control(uri: str, op: str, **values) -> dict:
    """A control request (``add``, ``set``, ``stats``) to the simulator serving ``uri``."""
    return request(uri, op, op, **values)

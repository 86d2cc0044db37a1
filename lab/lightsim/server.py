"""Light simulated hosts: many hosts served by one process, no libvirt daemon each.

    python -m lab.lightsim.server SOCKET      serve until killed (``manage.py simhosts --light``)

The process listens on a Unix socket and speaks JSON lines: one request object per line
(``{"op": "report", "host": "light-1"}``), one answer per line (``{"ok": true, ...}`` or
``{"ok": false, "error": "no_domain", "message": ...}``). ``lab.lightsim.driver`` is the
driver side (hosts reached by ``lightsim+unix:///NAME?socket=SOCKET`` URIs); ``add``, ``set``
and ``latency`` are the control side: they add a host with its domains, change a domain's state
behind Corral's back, and change how long a host takes to answer (the soak's slow host). Each
host answers after its own latency, and counts its reports (and
reports read at once by two processes: ``overlaps``) for tests and benchmarks.

Nothing here imports Django: the process stays small.
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
import threading
import time
import uuid
from pathlib import Path

STATES = ("running", "paused", "shutoff", "crashed", "pmsuspended")
NAMESPACE = uuid.UUID("4f8a1e52-3c1d-4f0e-9a57-6c3b2f1d0e77")


class Refused(Exception):
    def __init__(self, error: str, message: str):
        super().__init__(message)
        self.error = error


class Host:
    def __init__(self, name: str, cpus: int, memory_mb: int, latency_ms: float) -> None:
        self.name = name
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.latency = latency_ms / 1000
        self.domains: dict[str, dict] = {}  # uuid -> {"name", "title", "state"}
        self.reports = 0
        self.readers: dict[int, int] = {}  # client -> reads under way
        self.last_report: dict[str, float] = {}  # client -> when it last read


class Simulator:
    """Every host and domain, behind one lock."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self.lock = threading.Lock()
        self.overlaps = 0

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None)
        if not isinstance(op, str) or method is None:
            raise Refused("bad_request", f"Unknown operation {op!r}.")
        return method(request)

    def _host(self, request: dict) -> Host:
        host = self.hosts.get(request.get("host", ""))
        if host is None:
            raise Refused("no_host", f"No simulated host {request.get('host')!r} here.")
        return host

    def _domain(self, host: Host, request: dict) -> dict:
        key = request.get("uuid", "")
        domain = host.domains.get(key)
        if domain is None:  # by name or title (the VM's name), for people changing it by hand
            domain = next(
                (d for d in host.domains.values() if key in (d["name"], d["title"])), None
            )
        if domain is None:
            raise Refused("no_domain", f"Domain {key!r} not found on {host.name}.")
        return domain

    # -- control -----------------------------------------------------------------------------

    def op_add(self, request: dict) -> dict:
        """Add a host (idempotent) with ``vms`` running domains named HOST-vm-N."""
        name = request["host"]
        with self.lock:
            host = self.hosts.get(name)
            if host is None:
                host = self.hosts[name] = Host(
                    name,
                    int(request.get("cpus", 32)),
                    int(request.get("memory_mb", 131072)),
                    float(request.get("latency_ms", 0)),
                )
                for index in range(1, int(request.get("vms", 0)) + 1):
                    domain_name = f"{name}-vm-{index}"
                    domain_uuid = str(uuid.uuid5(NAMESPACE, domain_name))
                    host.domains[domain_uuid] = {
                        "name": domain_name,
                        "title": "",
                        "state": "running",
                    }
        return {"ok": True, "domains": len(host.domains)}

    def op_set(self, request: dict) -> dict:
        """Change a domain's state behind Corral's back."""
        state = request.get("state")
        if state not in STATES:
            raise Refused("bad_request", f"A state is one of {', '.join(STATES)}.")
        with self.lock:
            self._domain(self._host(request), request)["state"] = state
        return {"ok": True}

    def op_latency(self, request: dict) -> dict:
        """Change how long a host takes to answer (a host that answers slowly, then again not)."""
        latency_ms = float(request.get("latency_ms", 0))
        if latency_ms < 0:
            raise Refused("bad_request", "A latency is 0 ms or more.")
        with self.lock:
            self._host(request).latency = latency_ms / 1000
        return {"ok": True}

    def op_stats(self, request: dict) -> dict:
        with self.lock:
            hosts = {
                h.name: {"reports": h.reports, "last_report": dict(h.last_report)}
                for h in self.hosts.values()
            }
        return {"ok": True, "hosts": hosts, "overlaps": self.overlaps}

    # -- the driver's calls ----------------------------------------------------------------

    def op_report(self, request: dict) -> dict:
        client = str(request.get("client", ""))
        with self.lock:
            host = self._host(request)
            host.readers[client] = host.readers.get(client, 0) + 1
            if any(n and c != client for c, n in host.readers.items()):
                self.overlaps += 1
        try:
            time.sleep(host.latency)
            with self.lock:
                domains = [[u, d["name"], d["state"]] for u, d in host.domains.items()]
                host.reports += 1
                host.last_report[client] = time.time()
        finally:
            with self.lock:
                host.readers[client] -= 1
        return {
            "ok": True,
            "cpus": host.cpus,
            "memory_mb": host.memory_mb,
            "cpu_model": "lightsim",
            "networks": ["default"],
            "domains": domains,
        }

    def op_state(self, request: dict) -> dict:
        with self.lock:
            host = self._host(request)
            domain = host.domains.get(request.get("uuid", ""))
            return {"ok": True, "state": domain["state"] if domain else None}

    def op_define(self, request: dict) -> dict:
        with self.lock:
            host = self._host(request)
            key, name = request["uuid"], request["name"]
            if any(d["name"] == name for u, d in host.domains.items() if u != key):
                raise Refused("exists", f"The host already has another domain named {name!r}.")
            current = host.domains.get(key, {"state": "shutoff"})
            host.domains[key] = {
                "name": name,
                "title": request.get("title", ""),
                "state": current["state"],
            }
        return {"ok": True}

    def _change(self, request: dict, changes: dict[str, str]) -> dict:
        with self.lock:
            domain = self._domain(self._host(request), request)
            domain["state"] = changes.get(domain["state"], domain["state"])
        return {"ok": True}

    def op_start(self, request: dict) -> dict:
        return self._change(request, {"shutoff": "running", "crashed": "running"})

    def op_shutdown(self, request: dict) -> dict:
        return self._change(request, {"running": "shutoff", "paused": "shutoff"})

    def op_power_off(self, request: dict) -> dict:
        return self._change(request, {s: "shutoff" for s in ("running", "paused", "pmsuspended")})

    def op_suspend(self, request: dict) -> dict:
        return self._change(request, {"running": "paused"})

    def op_resume(self, request: dict) -> dict:
        return self._change(request, {"paused": "running"})

    def op_undefine(self, request: dict) -> dict:
        with self.lock:
            self._host(request).domains.pop(request.get("uuid", ""), None)
        return {"ok": True}


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        simulator: Simulator = self.server.simulator  # type: ignore[attr-defined]
        for line in self.rfile:
            try:
                answer = simulator.handle(json.loads(line))
            except Refused as refused:
                answer = {"ok": False, "error": refused.error, "message": str(refused)}
            except (ValueError, KeyError, TypeError) as exc:
                answer = {"ok": False, "error": "bad_request", "message": str(exc)}
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, _Handler)
        self.simulator = Simulator()


def serve(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    server = Server(str(path))
    os.chmod(path, 0o660)
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))

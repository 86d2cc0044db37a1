"""Times what a task cluster's sync asks a remote host, from a process of its own
(``python -m bench.fleet_probe SPEC OUT``, for bench/fleet_scenarios.py): a libvirt transport
that crashes its process ends this one, not the benchmark, and what was timed before is kept.

For each host of the spec: its connection opened, and its floor's (the host's own libvirt
socket, ``qemu+unix://``: the same daemon without SSH), all first and one after the other; with
``bare_ssh``, one login of Corral's own ssh command running ``true`` beside them. Then, on
``threads`` threads as a task cluster's syncer runs (a host started only while the budget
lasts): ``repeat`` host reports (``driver.host_report`` as the sync asks it), syncs
(``sync.sync_host``: the report and its comparison with the database) and round trips
(``getLibVersion``), and the report and round trip over the floor. One JSON line per host is
appended to OUT as soon as it is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.test_settings")


def _ms(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _open(spec: dict, host_id: int, floor_uri: str) -> dict:
    """Open the host's connection and its floor's, timed; with ``bare_ssh``, time one login of
    Corral's own ssh command beside them."""
    from hosts import sshtrust
    from hosts.driver import uris
    from hosts.driver.libvirt.connection import connection
    from hosts.models import Host

    host = Host.objects.get(pk=host_id)
    record: dict = {"host": host.name}
    try:
        record["open_ms"] = _ms(lambda: connection(host.uri))
        record["floor_open_ms"] = _ms(lambda: connection(floor_uri))
        if spec.get("bare_ssh"):
            target = uris.ssh_target(host.uri)
            command = [str(sshtrust.ssh_command()), f"{target.user}@{target.host}", "true"]
            record["bare_ssh_ms"] = _ms(lambda: subprocess.run(command, check=True, timeout=30))
    except Exception as exc:  # a failing transport is a figure too
        record["error"] = f"{type(exc).__name__}: {exc}"
    return record


def _time_calls(spec: dict, host_id: int, floor_uri: str, record: dict) -> dict:
    """Time a sync's calls to the host over its open connection, and the same over its floor."""
    from django.db import connection as database

    from hosts import driver, sync
    from hosts.driver.libvirt.connection import connection
    from hosts.models import Host

    host = Host.objects.get(pk=host_id)
    repeat = spec["repeat"]
    try:

        def report(uri: str = host.uri) -> None:
            driver.host_report(uri, host.storage_pool, host.storage_path)

        record["report_ms"] = [_ms(report) for _ in range(repeat)]
        record["sync_ms"] = [_ms(lambda: sync.sync_host(host_id)) for _ in range(repeat)]
        remote = connection(host.uri)
        record["rtt_ms"] = [_ms(remote.getLibVersion) for _ in range(repeat)]
        record["floor_report_ms"] = [_ms(lambda: report(floor_uri)) for _ in range(repeat)]
        local = connection(floor_uri)
        record["floor_rtt_ms"] = [_ms(local.getLibVersion) for _ in range(repeat)]
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        database.close()
    return record


def main() -> None:
    spec_path, out_path = sys.argv[1:3]
    spec = json.loads(Path(spec_path).read_text())
    import django

    django.setup()
    lock = threading.Lock()

    def write(record: dict) -> None:
        with lock, open(out_path, "a") as out:
            out.write(json.dumps(record) + "\n")

    # Every connection opened first, one after the other (a process opens one at a time), so
    # that no call timed below waits for another host's connection to open.
    opened = []
    for host_id, floor_uri in spec["hosts"]:
        record = _open(spec, host_id, floor_uri)
        if "error" in record:
            write(record)
        else:
            opened.append((host_id, floor_uri, record))
    deadline = time.monotonic() + spec["budget_s"]

    def one(host_id: int, floor_uri: str, record: dict) -> None:
        if time.monotonic() < deadline:
            write(_time_calls(spec, host_id, floor_uri, record))

    with ThreadPoolExecutor(max_workers=spec["threads"]) as pool:
        for host_id, floor_uri, record in opened:
            pool.submit(one, host_id, floor_uri, record)


if __name__ == "__main__":
    main()

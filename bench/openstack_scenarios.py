"""Nova's server create, as a user of the real ``openstack`` CLI sees it: ``openstack server
create --wait`` until ACTIVE for a flavor whose pool hands over a prestarted VM, beside the
same for a flavor that boots a new VM, and beside the CLI's floor (``openstack flavor list``:
the CLI's start-up, a token and one call). The same two over bare HTTP (one token, then
``POST /servers`` and ``GET /servers/{id}`` every 20 ms until ACTIVE) show them without the
CLI, and one pool hit's ``POST /servers`` is counted in SQL queries in-process.

Everything is real and on the bench database: simulated hosts (libvirt test-driver daemons)
synced Up, a task cluster (``manage.py qcluster``) running the jobs and the prestart monitor,
the ASGI web tier as ``make serve`` runs it, and one image store shared by every process.
Each server is deleted (a pool's VM goes back to its pool) and the pool is full again before
the next is created, so every pool hit meets the pool as its monitor keeps it.

The CLI's ``--wait`` asks for the server once right after creating it and then every 5 s
(osc-lib's ``wait_for_status``), so a server that is not ACTIVE at the first look costs
the CLI at least 5 s more, however soon it boots.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ
from rest_framework.test import APIClient

from bench.fleet import make_fleet
from bench.serve_scenarios import web_server
from hosts import images, sync
from hosts.models import Cluster, Host, HostStatus, Image, Template, VirtualMachine
from lab import demo as labdemo
from lab import simhosts
from lab.childprocess import asgi_command, start_task_cluster
from pools.models import VmPool
from pools.services import create_pool
from project.access.grants import grant_role
from project.models import Role

User = get_user_model()
ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "var" / "openstack-venv" / "bin"
PASSWORD = "bench-Corral-1"
HOSTS = 2
POOL_SIZE = 6
PRESTARTED = 4
CLI_RUNS = 5  # the floor and the pool hit, taken in turns (the CLI's start-up varies)
COLD_RUNS = 3
HTTP_RUNS = 5
POLL_S = 0.02
TIMEOUT_S = 120
WEB_WORKERS = 2  # as `make serve` runs by default
COMPUTE = "/compute/v2.1"
VERSION = {"OpenStack-API-Version": "compute 2.37"}  # ``networks`` is required from 2.37


def _wait(check, what: str, timeout: float = TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


# -- the farm ------------------------------------------------------------------------------------


def _task_cluster(store: Path, log: Path) -> subprocess.Popen:
    """``manage.py qcluster`` with the tests' short intervals (tests/conftest.py TaskCluster),
    the prestart monitor run every second."""
    return start_task_cluster(
        log,
        Q_WORKERS="3",
        Q_POLL="0.1",
        CORRAL_SYNC_INTERVAL="1",
        CORRAL_TICK_SECONDS="0.2",
        CORRAL_JOB_HEARTBEAT_INTERVAL="0.5",
        CORRAL_JOB_HEARTBEAT_TIMEOUT="3",
        CORRAL_JOB_DISPATCH_RETRY="5",
        VMPOOL_MONITOR_INTERVAL="1",
        CORRAL_IMAGE_STORE=store,
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _image(folder: Path, cluster: Cluster):
    """A 1 MiB raw disk image in the store, visible in the cluster."""
    path = folder / "bench-disk.raw"
    path.write_bytes(b"\0" * (1 << 20))
    return images.create_image(
        labdemo.stored_upload(path), name="bench-disk", kind="disk", cluster=cluster
    )


def _farm(daemons: list[simhosts.SimHost], folder: Path):
    """The cluster of ``daemons`` (synced Up), alice (PowerUser there), flavors m1.pool (with a
    pool alice may take from) and m1.cold, both of one image: (alice, pool, image)."""
    make_fleet(0, clusters=0)  # no hosts, clusters or templates of other scenarios
    cluster = Cluster.objects.create(name="nova-bench")
    for daemon in daemons:
        host = Host.objects.create(name=daemon.name, cluster=cluster, uri=daemon.uri)
        sync.sync_host(host.pk)
    down = Host.objects.filter(cluster=cluster).exclude(status=HostStatus.UP)
    if down.exists():
        raise RuntimeError(f"simulated hosts not Up after a sync: {list(down.values('name'))}")
    image = _image(folder, cluster)
    size = {"cluster": cluster, "vcpus": 1, "memory_mb": 128, "disk_gb": 1, "disk_image": image}
    pooled = Template.objects.create(name="m1.pool", **size)
    Template.objects.create(name="m1.cold", **size)
    alice, _ = User.objects.get_or_create(username="alice")
    alice.set_password(PASSWORD)
    alice.save()
    grant_role(Role.objects.get(name="PowerUser"), cluster, user=alice)
    pool = VmPool(
        name="nova-bench",
        cluster=cluster,
        template=pooled,
        size=POOL_SIZE,
        prestarted_vms=PRESTARTED,
        max_user_vms=100,
    )
    pool.full_clean()
    create_pool(pool)
    grant_role(Role.objects.get(name="UserRole"), pool, user=alice)
    return alice, pool, image


def _clear() -> None:
    """Remove what ``_farm`` made (its daemons are gone), so later scenarios start clean."""
    clusters = Cluster.objects.filter(name="nova-bench")
    VirtualMachine.objects.filter(cluster__in=clusters).delete()
    VmPool.objects.filter(cluster__in=clusters).delete()
    Template.objects.filter(cluster__in=clusters).delete()
    Image.objects.filter(cluster__in=clusters).delete()
    Host.objects.filter(cluster__in=clusters).delete()
    clusters.delete()
    OrmQ.objects.all().delete()


def _pool_full(pool: VmPool) -> None:
    """Wait until the pool has its prestarted VMs Up and unassigned."""
    _wait(
        lambda: VmPool.objects.with_counts().get(pk=pool.pk).running_unassigned >= PRESTARTED,
        f"{PRESTARTED} Up unassigned VMs in the pool",
    )


# -- the clients ---------------------------------------------------------------------------------


def _cli(folder: Path, base_url: str):
    """run(*args) -> (milliseconds, the finished process) of ``openstack --os-cloud alice
    ...``."""
    clouds = folder / "clouds.yaml"
    clouds.write_text(
        "clouds:\n"
        "  alice:\n"
        "    auth:\n"
        f"      auth_url: {base_url}/identity/v3\n"
        "      username: alice\n"
        f"      password: {PASSWORD}\n"
        "      project_name: alice\n"
        "      user_domain_name: Default\n"
        "      project_domain_name: Default\n"
        "    region_name: RegionOne\n"
        "    interface: public\n"
        "    identity_api_version: 3\n"
    )
    env = {
        "PATH": f"{CLIENTS}:/usr/bin:/bin",
        "HOME": str(folder),
        "OS_CLIENT_CONFIG_FILE": str(clouds),
        "LC_ALL": "C.UTF-8",
    }

    def run(*args: str) -> tuple[float, subprocess.CompletedProcess]:
        start = time.perf_counter()
        done = subprocess.run(
            [str(CLIENTS / "openstack"), "--os-cloud", "alice", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        ms = (time.perf_counter() - start) * 1000
        if done.returncode != 0:
            raise RuntimeError(f"openstack {' '.join(args)} failed: {done.stderr[-2000:]}")
        return ms, done

    return run


def _token(base_url: str) -> str:
    scope = {"project": {"name": "alice", "domain": {"name": "Default"}}}
    user = {"name": "alice", "domain": {"name": "Default"}, "password": PASSWORD}
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": user}}}}
    body["auth"]["scope"] = scope
    response = requests.post(f"{base_url}/identity/v3/auth/tokens", json=body, timeout=30)
    response.raise_for_status()
    return response.headers["X-Subject-Token"]


def _server_body(name: str, flavor: str, image) -> dict:
    return {
        "server": {
            "name": name,
            "flavorRef": flavor,
            "imageRef": str(image.uuid),
            "networks": "auto",
        }
    }


def _http_create(session: requests.Session, base_url: str, name: str, flavor: str, image):
    """(milliseconds to ACTIVE, milliseconds of the POST, server id): from ``POST /servers``
    to a ``GET`` that says ACTIVE."""
    start = time.perf_counter()
    created = session.post(
        f"{base_url}{COMPUTE}/servers", json=_server_body(name, flavor, image), timeout=30
    )
    posted = (time.perf_counter() - start) * 1000
    if created.status_code != 202:
        raise RuntimeError(f"POST /servers: {created.status_code} {created.text[:500]}")
    server_id = created.json()["server"]["id"]
    while True:
        shown = session.get(f"{base_url}{COMPUTE}/servers/{server_id}", timeout=30)
        status = shown.json()["server"]["status"]
        if status == "ACTIVE":
            return (time.perf_counter() - start) * 1000, posted, server_id
        if status == "ERROR" or time.perf_counter() - start > TIMEOUT_S:
            raise RuntimeError(f"server {name}: {status}: {shown.text[:500]}")
        time.sleep(POLL_S)


def _check(server_id: str, pool: VmPool, from_pool: bool) -> None:
    """The server is the pool's VM (a pool hit) or a VM of its own (a cold boot)."""
    vm = VirtualMachine.objects.get(uuid=server_id)
    if (vm.pool_id == pool.pk) != from_pool:
        kind = "a pool hit" if from_pool else "a cold boot"
        raise RuntimeError(f"server {server_id} was meant to be {kind}: VM pool {vm.pool_id}")


def _delete(session: requests.Session, base_url: str, server_id: str, pool: VmPool) -> None:
    """Delete the server (a pool's VM goes back to its pool) and wait for the pool to be full."""
    response = session.delete(f"{base_url}{COMPUTE}/servers/{server_id}", timeout=30)
    if response.status_code != 204:
        raise RuntimeError(f"DELETE server: {response.status_code} {response.text[:500]}")
    _pool_full(pool)


def _pool_hit_queries(token: str, pool: VmPool, image) -> tuple[int, int, str]:
    """SQL queries of one pool hit's ``POST /servers`` and of the ``GET /servers/{id}`` that
    sees it ACTIVE, in-process: (POST queries, GET queries, server id)."""
    client = APIClient()
    client.credentials(HTTP_X_AUTH_TOKEN=token, HTTP_OPENSTACK_API_VERSION="compute 2.37")
    reset_queries()
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(
            f"{COMPUTE}/servers", _server_body("counted", "m1.pool", image), format="json"
        )
    if response.status_code != 202:
        raise RuntimeError(f"POST /servers in-process: {response.status_code} {response.content}")
    posted = len(ctx.captured_queries)  # read now: the capture is a slice of the query log
    server_id = response.json()["server"]["id"]
    _check(server_id, pool, from_pool=True)
    reset_queries()
    with CaptureQueriesContext(connection) as shown:
        status = client.get(f"{COMPUTE}/servers/{server_id}").json()["server"]["status"]
    if status != "ACTIVE":
        raise RuntimeError(f"a pool hit is {status}, not ACTIVE, at once")
    return posted, len(shown.captured_queries), server_id


# -- the scenario --------------------------------------------------------------------------------


def nova_server_create(measure):
    if not (CLIENTS / "openstack").exists():
        skipped = "skipped: no openstack CLI here (make openstack-clients)"
        return [("nova server create", skipped, "", "")]
    folder = Path(tempfile.mkdtemp(prefix="corral-nova-bench-", dir="/tmp"))
    folder.chmod(0o755)  # the daemons run as an unprivileged user
    store = folder / "images"
    store.mkdir()
    saved_store = settings.CORRAL_IMAGE_STORE
    settings.CORRAL_IMAGE_STORE = store
    daemons = [
        simhosts.SimHost(name=f"nova-bench-{i}", directory=folder / f"sim-{i}")
        for i in range(1, HOSTS + 1)
    ]
    tasks = None
    try:
        for daemon in daemons:
            simhosts.start(daemon)
        alice, pool, image = _farm(daemons, folder)
        tasks = _task_cluster(store, folder / "qcluster.log")
        _pool_full(pool)
        with web_server(
            lambda port: asgi_command(f"127.0.0.1:{port}", WEB_WORKERS),
            CORRAL_IMAGE_STORE=store,
            CORRAL_DB_POOL_SIZE=10,  # as `make serve` runs it: a pool, no persistent connections
            CONN_MAX_AGE=0,
        ) as base_url:
            figures = _measure(folder, base_url, pool, image)
    except Exception:
        if tasks is not None:
            log = (folder / "qcluster.log").read_text(errors="replace")[-3000:]
            print(f"task cluster log (end):\n{log}", file=sys.stderr)
        raise
    finally:
        if tasks is not None:
            _stop(tasks)
        for daemon in daemons:
            simhosts.stop(daemon)
        _clear()
        settings.CORRAL_IMAGE_STORE = saved_store
        shutil.rmtree(folder, ignore_errors=True)
    return _rows(figures)


def _measure(folder: Path, base_url: str, pool: VmPool, image) -> dict:
    run = _cli(folder, base_url)
    run("flavor", "list")  # warm: the CLI's bytecode, the server's workers

    session = requests.Session()
    token = _token(base_url)
    session.headers.update({"X-Auth-Token": token, **VERSION})

    def cli_create(name: str, flavor: str, from_pool: bool, *debug: str) -> tuple[float, int]:
        """Milliseconds of the CLI's create, and the requests it made (counted with
        ``--debug``, which logs each)."""
        ms, done = run(*debug,
            "server", "create", "--flavor", flavor, "--image", str(image.uuid),
            "--nic", "auto", "--wait", "-f", "json", name,
        )  # fmt: skip
        shown = json.loads(done.stdout)
        if shown["status"] != "ACTIVE":
            raise RuntimeError(f"server {name} is {shown['status']} after --wait")
        _check(shown["id"], pool, from_pool)
        _delete(session, base_url, shown["id"], pool)
        return ms, done.stderr.count("REQ: curl")

    def http_create(name: str, flavor: str, from_pool: bool) -> tuple[float, float]:
        ms, posted, server_id = _http_create(session, base_url, name, flavor, image)
        _check(server_id, pool, from_pool)
        _delete(session, base_url, server_id, pool)
        return ms, posted

    # Untimed: the first creates warm the web workers; --debug shows each path's requests.
    _, floor_requests = run("--debug", "flavor", "list")
    _, hit_requests = cli_create("warm-pool", "m1.pool", True, "--debug")
    _, cold_requests = cli_create("warm-cold", "m1.cold", False, "--debug")
    floor, cli_hit = [], []
    for i in range(CLI_RUNS):
        floor.append(run("flavor", "list")[0])
        cli_hit.append(cli_create(f"cli-pool-{i}", "m1.pool", True)[0])
    cli_cold = [cli_create(f"cli-cold-{i}", "m1.cold", False)[0] for i in range(COLD_RUNS)]
    http_hit = [http_create(f"http-pool-{i}", "m1.pool", True) for i in range(HTTP_RUNS)]
    http_cold = [http_create(f"http-cold-{i}", "m1.cold", False) for i in range(HTTP_RUNS)]
    queries, get_queries, server_id = _pool_hit_queries(token, pool, image)
    _delete(session, base_url, server_id, pool)
    return {
        "floor": statistics.median(floor),
        "cli_hit": statistics.median(cli_hit),
        "cli_cold": statistics.median(cli_cold),
        "http_hit": statistics.median(ms for ms, _ in http_hit),
        "http_cold": statistics.median(ms for ms, _ in http_cold),
        "post_hit": statistics.median(posted for _, posted in http_hit),
        "post_cold": statistics.median(posted for _, posted in http_cold),
        "queries": queries,
        "get_queries": get_queries,
        "requests": (
            floor_requests.stderr.count("REQ: curl"),
            hit_requests,
            cold_requests,
        ),
    }


def _rows(f: dict) -> list[tuple]:
    beyond = f["cli_hit"] - f["floor"]
    floor_requests, hit_requests, cold_requests = f["requests"]
    return [
        (
            "openstack flavor list (the CLI's floor)",
            f"{f['floor']:.0f} ms (median of {CLI_RUNS}), {floor_requests} requests",
            "(reference)",
            "-",
        ),
        (
            "nova server create --wait → ACTIVE, pool hit (openstack CLI)",
            f"{f['cli_hit']:.0f} ms (CLI floor {f['floor']:.0f} ms: {beyond:+.0f} ms), "
            f"{hit_requests} requests",
            "ACTIVE in < 1 s beyond the CLI's floor",
            "yes" if beyond < 1000 else "NO",
        ),
        (
            "nova server create --wait → ACTIVE, cold boot (openstack CLI)",
            f"{f['cli_cold']:.0f} ms = {f['cli_cold'] / f['cli_hit']:.1f}× the pool hit "
            f"(the CLI looks again after 5 s), {cold_requests} requests",
            "(reference)",
            "-",
        ),
        (
            "POST /servers → ACTIVE over HTTP, pool hit / cold",
            f"{f['http_hit']:.0f} ms / {f['http_cold']:.0f} ms "
            f"(= {f['http_cold'] / f['http_hit']:.1f}×; the POST {f['post_hit']:.0f} / "
            f"{f['post_cold']:.0f} ms); pool hit: POST {f['queries']} queries, GET "
            f"{f['get_queries']}",
            "pool hit < 1 s",
            "yes" if f["http_hit"] < 1000 else "NO",
        ),
    ]

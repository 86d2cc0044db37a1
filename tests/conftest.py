"""Shared fixtures: users, grants and inventory objects made through the real models."""

import itertools
from contextlib import contextmanager

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from hosts.models import Cluster, Host, Template, VirtualMachine
from pools.models import VmPool
from project.access.grants import grant_role, scope_object
from project.models import Role

# Fixtures the apps' tests share across folders (a cluster of the simulated hosts, pools of
# rows, lease requests, the admin console's sessions): one module per app, for the whole suite.
pytest_plugins = [
    "tests.hosts.fixtures",
    "tests.pools.fixtures",
    "tests.leases.fixtures",
    "tests.project.admin.fixtures",
    "tests.project.fixtures",
    "tests.openstack.fixtures",
]

User = get_user_model()
_serial = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_serial)}"


# Rows a refused request may leave behind without having changed anything.
UNTRACKED_MODELS = {"sessions.session", "django_q.ormq", "django_q.task"}


def stored_rows() -> dict[str, list[dict]]:
    """Every row of every table (Corral's, guardian's, Django's auth...), by model: what a
    refused request must leave as it was."""
    return {
        model._meta.label_lower: list(model._base_manager.order_by("pk").values())
        for model in apps.get_models()
        if model._meta.managed and model._meta.label_lower not in UNTRACKED_MODELS
    }


@pytest.fixture
def make_user(db):
    def make(username: str | None = None, *, superuser: bool = False, **extra) -> User:
        username = username or unique("user")
        if superuser:
            return User.objects.create_superuser(username, f"{username}@example.org", "pw-Corral-1")
        return User.objects.create_user(username, f"{username}@example.org", "pw-Corral-1", **extra)

    return make


@pytest.fixture
def admin_user(make_user):
    return make_user("root-admin", superuser=True)


@pytest.fixture
def grant(db):
    """grant(user_or_group, "PowerUser", obj_or_None) -> the Grant (None obj = system)."""

    def give(principal, role_name: str, obj=None):
        role = Role.objects.get(name=role_name)
        target = obj if obj is not None else scope_object("system", None)
        if isinstance(principal, Group):
            return grant_role(role, target, group=principal)[0]
        return grant_role(role, target, user=principal)[0]

    return give


@pytest.fixture
def client_for():
    """client_for(user) -> an APIClient authenticated as that user (None: anonymous)."""

    def make(user=None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def make_cluster(db):
    def make(name: str | None = None, **extra) -> Cluster:
        return Cluster.objects.create(name=name or unique("cluster"), **extra)

    return make


@pytest.fixture
def make_host(db, make_cluster):
    def make(cluster: Cluster | None = None, name: str | None = None, **extra) -> Host:
        name = name or unique("host")
        cluster = cluster or make_cluster()
        extra.setdefault("uri", f"qemu+ssh://root@{name}.example.org/system")
        return Host.objects.create(cluster=cluster, name=name, **extra)

    return make


@pytest.fixture
def make_template(db):
    def make(name: str | None = None, **extra) -> Template:
        return Template.objects.create(name=name or unique("tmpl"), **extra)

    return make


@pytest.fixture
def make_vm(db, make_cluster, make_template):
    def make(cluster: Cluster | None = None, template: Template | None = None, **extra):
        cluster = cluster or make_cluster()
        template = template or make_template()
        extra.setdefault("name", unique("vm"))
        for field in ("vcpus", "memory_mb", "disk_gb"):
            extra.setdefault(field, getattr(template, field))
        return VirtualMachine.objects.create(cluster=cluster, template=template, **extra)

    return make


@pytest.fixture
def make_pool(db, make_cluster, make_template):
    def make(cluster: Cluster | None = None, template: Template | None = None, **extra):
        return VmPool.objects.create(
            name=extra.pop("name", unique("pool")),
            cluster=cluster or make_cluster(),
            template=template or make_template(),
            **extra,
        )

    return make


@pytest.fixture(scope="session")
def sim_daemons(tmp_path_factory):
    """Three simulated hosts (real libvirt daemons serving the test driver) for the session.

    Their state is shared by every process, like real hosts; tests must clean up the domains
    they create (or use fresh UUIDs).
    """
    import shutil
    import tempfile
    from pathlib import Path

    from lab import simhosts

    base = Path(tempfile.mkdtemp(prefix="corral-sim-", dir="/tmp"))
    base.chmod(0o755)
    daemons = [simhosts.SimHost(name=f"sim-{i}", directory=base / f"sim-{i}") for i in (1, 2, 3)]
    for daemon in daemons:
        simhosts.start(daemon)
    yield daemons
    for daemon in daemons:
        simhosts.stop(daemon)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def fragile_daemon():
    """A simulated host of this test's own (named ``lost``), free to be stopped, killed and
    started again."""
    import shutil
    import tempfile
    from pathlib import Path

    from lab import simhosts

    base = Path(tempfile.mkdtemp(prefix="corral-lost-", dir="/tmp"))
    base.chmod(0o755)
    daemon = simhosts.SimHost(name="lost", directory=base / "lost")
    simhosts.start(daemon)
    yield daemon
    simhosts.stop(daemon)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def qemu_daemons():
    """Two real QEMU hosts (session libvirt daemons, each with its storage pool ``corral``).

    Their folders are unique and short (``/tmp/cq-XXXXXXXX``), so parallel runs do not meet.
    At the end their guests are destroyed, the daemons stopped and what they left killed.
    """
    import shutil

    from lab import qemuhosts

    hosts = [
        qemuhosts.QemuHost(name=f"qemu-{i}", directory=qemuhosts.new_directory()) for i in (1, 2)
    ]
    try:
        for host in hosts:
            qemuhosts.start(host)
        yield hosts
    finally:
        for host in hosts:
            qemuhosts.stop(host)
            shutil.rmtree(host.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_storage_daemons():
    """Two real QEMU hosts whose storage pools are one folder (the first's), as two hosts
    mounting one NFS export would have.

    The second is reached for migrations only at its Host's migration address: it listens for
    them on 127.0.0.3 and gives its peers the name 127.0.0.2 for itself, where nothing listens
    (a host whose own name does not lead to it from the others). Stopped and removed at the
    end like ``qemu_daemons``.
    """
    import shutil

    from lab import qemuhosts

    first = qemuhosts.QemuHost(name="shared-1", directory=qemuhosts.new_directory())
    second = qemuhosts.QemuHost(
        name="shared-2",
        directory=qemuhosts.new_directory(),
        pool_path=first.pool_directory,
        migration_listen="127.0.0.3",
        migration_name="127.0.0.2",
    )
    hosts = [first, second]
    try:
        for host in hosts:  # the first makes the folder the second's pool uses
            qemuhosts.start(host)
        yield hosts
    finally:
        for host in reversed(hosts):
            qemuhosts.stop(host)
            shutil.rmtree(host.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def fleet_hosts():
    """Two fleet hosts (lab/fleethosts.py): each in namespaces of its own on a bridge of this
    run's, reached over SSH with Corral's own key (``qemu+ssh://root@ADDRESS/system``), each
    with its storage pool ``corral``; taken down at the end, and by the next run if this one
    dies first. Skipped only where the machine cannot make them (not root, no namespaces)."""
    import os
    import tempfile
    from pathlib import Path

    from lab import fleethosts

    reason = fleethosts.unavailable()
    if reason:
        pytest.skip(f"fleet hosts cannot run here: {reason}")
    # Not under pytest's base folder: runs side by side prune each other's old ones.
    directory = Path(tempfile.mkdtemp(prefix="corral-fleet-", dir="/tmp"))
    try:
        yield fleethosts.up(2, directory=directory, owner=os.getpid()).hosts
    finally:
        fleethosts.down(directory)


@pytest.fixture(scope="session")
def tiny_guest():
    """The tiny guest's kernel, initrd and blank disk (lab/tinyguest.py), built once."""
    from lab import tinyguest

    return tinyguest.build()


class TaskCluster:
    """A real ``manage.py qcluster`` in its own process group, on the test database."""

    def __init__(self, log_path, **env):
        import sys

        from lab.childprocess import child_env

        self.log_path = log_path
        defaults = {
            "DJANGO_SETTINGS_MODULE": "project.test_settings",
            "Q_WORKERS": "3",
            "Q_POLL": "0.1",
            "CORRAL_SYNC_INTERVAL": "1",
            "CORRAL_TICK_SECONDS": "0.2",
            "CORRAL_JOB_HEARTBEAT_INTERVAL": "0.5",
            "CORRAL_JOB_HEARTBEAT_TIMEOUT": "3",
            "CORRAL_JOB_DISPATCH_RETRY": "5",
        }
        self.env = child_env(**{**defaults, **env})
        self.command = [sys.executable, "manage.py", "qcluster"]
        self.process = None

    def start(self) -> "TaskCluster":
        import subprocess
        from pathlib import Path

        log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.command,
            cwd=Path(__file__).resolve().parent.parent,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def kill(self) -> None:
        """kill -9 the whole cluster (sentinel and workers, those of a sentinel that died
        first too), as a crash would."""
        import contextlib
        import os
        import signal

        if not self.process:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def log(self) -> str:
        return open(self.log_path).read()


@pytest.fixture
def task_cluster(transactional_db, tmp_path):
    """start(**env) -> a running TaskCluster on the test database; all killed afterwards (a
    graceful stop would wait for the ticker to end its run, up to CORRAL_TICKER_RUN_SECONDS,
    for a test that is over)."""
    started = []

    def start(**env) -> TaskCluster:
        cluster = TaskCluster(tmp_path / f"qcluster-{len(started)}.log", **env).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.kill()


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.1, message=""):
    """Poll ``predicate`` until it returns something truthy; fail with ``message`` on timeout.

    ``message`` may be a callable, so that what it reports is read at the time of the failure.
    """
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(text or f"condition not met within {timeout} s")
        time.sleep(interval)


def lock_waiters() -> int:
    """How many sessions on the test database wait for a lock now (PostgreSQL)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # a transaction sees one snapshot
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@contextmanager
def holding(write):
    """While inside, another connection has run ``write()`` in a transaction it keeps open
    (committed on leaving): whoever needs the rows it locked waits until then."""
    import threading

    from django.db import connection, transaction

    holding, release = threading.Event(), threading.Event()
    failed = []

    def hold() -> None:
        try:
            with transaction.atomic():
                write()
                holding.set()
                release.wait(60)
        except Exception as exc:  # reported below
            failed.append(exc)
            holding.set()
        finally:
            connection.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert holding.wait(20), "the transaction never began"
        assert not failed, failed
        yield
    finally:
        release.set()
        holder.join(30)
    assert not failed, failed


@pytest.fixture(scope="session", autouse=True)
def _close_event_listener(django_db_setup):
    """The event feed's LISTEN connection must close before the test database is dropped."""
    yield
    from project.events import stop_listener

    stop_listener()


# Minutes-long tests whose outcome does not depend on the database: a real browser driving the
# pages, the real OpenStack clients, a cold boot of the Debian cloud image, real guests on
# fleet hosts over SSH (their host plumbing, not the database, is what they test). CI runs the whole
# suite on PostgreSQL and on SQLite side by side (.ci/run); these run in the SQLite run (the
# database `make run` uses) and are skipped on PostgreSQL, unless CORRAL_TESTS_ON_EVERY_DATABASE=1.
ONE_DATABASE_ONLY = (
    "tests/browser/",
    "tests/openstack/test_real_",
    "tests/lab/test_cloudimage.py",
    "tests/lab/test_fleethosts.py",
)


def pytest_collection_modifyitems(config, items):
    import os

    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    if not on_postgres or os.environ.get("CORRAL_TESTS_ON_EVERY_DATABASE") == "1":
        return
    skip = pytest.mark.skip(
        reason="does not depend on the database: runs on SQLite (CI runs both side by side); "
        "CORRAL_TESTS_ON_EVERY_DATABASE=1 runs it here too"
    )
    root = str(config.rootpath)
    for item in items:
        where = str(item.path)[len(root) + 1 :]
        if where.startswith(ONE_DATABASE_ONLY):
            item.add_marker(skip)

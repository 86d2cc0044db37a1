"""A host's status tells apart why Corral cannot use it: nothing answers (NonResponsive,
unreachable), or the host answered and would not let Corral in — its login refused, its SSH
host key changed or unknown, its libvirt refusing (Error, never fenced, its VMs left as they
were) — and a healthy host is Up with no reason. ``status_detail`` says it with the host's own
words.

Hosts reached over SSH are a real SSH server on the loopback (lab/sshserver.py) and the real
``ssh`` client, trusting the host keys a test gives it; libvirt's own refusals are real
daemons configured to refuse."""

import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from hosts import sync
from hosts.models import Host, HostStatus
from lab import simhosts, sshserver
from lab.childprocess import free_port

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="the lab's SSH server needs root"),
]


@pytest.fixture(scope="module")
def ssh_server():
    server = sshserver.start()
    yield server
    sshserver.stop(server)


@pytest.fixture
def trusting(ssh_server, monkeypatch):
    """trusting(host_key_line or None): libvirt's ``ssh`` knows only that key for the server."""

    def trust(key: str | None) -> None:
        folder = ssh_server.client_path(key)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    return trust


@pytest.fixture
def refusing_daemon():
    """refusing_daemon(libvirtd_conf) -> a simulated host whose daemon runs with that
    configuration; stopped afterwards."""
    started = []

    def start(conf: str) -> simhosts.SimHost:
        base = Path(tempfile.mkdtemp(prefix="corral-refusing-", dir="/tmp"))
        base.chmod(0o755)
        daemon = simhosts.SimHost(name="refusing", directory=base / "refusing")
        simhosts.start_daemon(daemon, libvirtd_conf=conf)
        started.append((base, daemon))
        return daemon

    yield start
    for base, daemon in started:
        simhosts.stop_daemon(daemon)
        shutil.rmtree(base, ignore_errors=True)


def _synced(make_host, uri: str) -> Host:
    host = make_host(uri=uri, status=HostStatus.UP)
    sync.sync_host(host.pk)
    return Host.objects.get(pk=host.pk)


def _key_of(private_key: Path) -> str:
    return " ".join(Path(f"{private_key}.pub").read_text().split()[:2])


def test_a_host_nothing_answers_at_is_non_responsive_for_being_unreachable(make_host):
    host = _synced(make_host, f"qemu+ssh://root@127.0.0.1:{free_port()}/system?no_tty=1")

    assert (host.status, host.status_reason) == ("non_responsive", "unreachable")
    assert host.status_detail.startswith("The host does not answer. (")
    assert "Connection refused" in host.status_detail


def test_a_host_that_refuses_corrals_login_is_in_error_and_its_vms_stay_as_they_were(
    ssh_server, trusting, make_host, make_vm
):
    trusting(ssh_server.host_key_line)
    host = make_host(uri=ssh_server.uri(key=ssh_server.other_key), status=HostStatus.UP)
    vm = make_vm(cluster=host.cluster, host=host, status="up", power_state="running")

    sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (host.status, host.status_reason) == ("error", "auth_refused")
    assert host.status_detail.startswith(
        "The host refused Corral's login (authentication failed). ("
    )
    assert "Permission denied (publickey)" in host.status_detail
    vm.refresh_from_db()
    assert (vm.status, vm.power_state) == ("up", "running")  # not a lost host's Unknown


def test_a_host_whose_ssh_host_key_changed_is_in_error_for_that(ssh_server, trusting, make_host):
    trusting(_key_of(ssh_server.other_key))  # what it was known by: another key

    host = _synced(make_host, ssh_server.uri())

    assert (host.status, host.status_reason) == ("error", "host_key_changed")
    assert host.status_detail.startswith("The host's SSH key has changed since it was trusted")
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in host.status_detail
    assert "@@@" not in host.status_detail


def test_a_host_whose_ssh_host_key_is_unknown_is_in_error_for_that(ssh_server, trusting, make_host):
    trusting(None)

    host = _synced(make_host, ssh_server.uri())

    assert (host.status, host.status_reason) == ("error", "host_key_unknown")
    assert "Host key verification failed" in host.status_detail


def test_a_host_that_lets_corral_in_but_runs_no_libvirt_is_in_error_for_libvirt(
    ssh_server, trusting, make_host
):
    trusting(ssh_server.host_key_line)

    host = _synced(make_host, ssh_server.uri())

    assert (host.status, host.status_reason) == ("error", "libvirt_refused")
    assert host.status_detail.startswith(
        "The host answered, but its libvirt refused the connection. ("
    )
    assert "virt-ssh-helper" in host.status_detail


def test_a_libvirt_that_refuses_corrals_login_is_authentication_refused(refusing_daemon, make_host):
    daemon = refusing_daemon('auth_unix_rw = "sasl"\n')

    host = _synced(make_host, daemon.uri)

    assert (host.status, host.status_reason) == ("error", "auth_refused")
    assert "authentication failed" in host.status_detail


def test_a_libvirt_whose_access_control_refuses_corral_is_libvirt_refused(
    refusing_daemon, make_host
):
    daemon = refusing_daemon('access_drivers = [ "polkit" ]\n')
    uri = f"qemu+unix:///session?socket={daemon.socket}"

    host = _synced(make_host, uri)

    assert (host.status, host.status_reason) == ("error", "libvirt_refused")
    assert "access denied" in host.status_detail


def test_a_host_that_refuses_corral_is_never_fenced(
    ssh_server, trusting, make_host, hooks_dir, settings, time_machine, tmp_path
):
    trusting(ssh_server.host_key_line)
    fenced = tmp_path / "fenced"
    hooks_dir("host-fence", "10-power-off", f"touch {fenced}")
    settings.CORRAL_HOST_DOWN_GRACE = 60
    host = _synced(make_host, ssh_server.uri(key=ssh_server.other_key))

    time_machine.move_to(timezone.now() + timedelta(seconds=120))
    sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (host.status, host.status_reason, host.confirmed_down_at) == (
        "error",
        "auth_refused",
        None,
    )
    assert not fenced.exists()


def test_a_host_that_answers_again_is_up_with_no_reason(
    fragile_daemon, make_host, admin_user, client_for
):
    simhosts.kill(fragile_daemon)
    host = _synced(make_host, fragile_daemon.uri)
    assert (host.status, host.status_reason) == ("non_responsive", "unreachable")

    simhosts.start(fragile_daemon)
    sync.sync_host(host.pk)

    shown = client_for(admin_user).get(f"/api/hosts/{host.pk}/").json()
    assert (shown["status"], shown["status_reason"], shown["status_detail"]) == ("up", "", "")

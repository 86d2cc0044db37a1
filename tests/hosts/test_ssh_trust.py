"""Hosts reached over SSH trust only the host key an admin confirmed, and Corral signs in with
a key of its own (hosts/sshtrust.py). A real sshd on the loopback plays the host: Corral reads
the key it offers, refuses to connect until an admin trusts it, and refuses again, naming both
fingerprints, when the host's key changes."""

import os
import shutil
import socket
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from hosts import sshtrust, sync
from hosts.driver import uris
from hosts.models import Host, HostStatus
from project.models import Event
from tests.conftest import unique, wait_until

SSHD = "/usr/sbin/sshd"
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def ssh_dir(settings, tmp_path):
    settings.CORRAL_SSH_DIR = tmp_path / "corral-ssh"
    return settings.CORRAL_SSH_DIR


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text()


def _openssh_fingerprint(public_key_file: Path) -> str:
    shown = subprocess.run(
        ["ssh-keygen", "-lf", str(public_key_file)], capture_output=True, text=True, check=True
    )
    return shown.stdout.split()[1]


class Sshd:
    """sshd on a free loopback port, with a host key of its own, letting Corral's key in."""

    def __init__(self, folder: Path, authorized: str) -> None:
        self.folder = folder
        folder.mkdir()
        self.host_key = folder / "host_key"
        _keygen(self.host_key)
        (folder / "authorized_keys").write_text(authorized + "\n")
        os.chmod(folder, 0o700)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = None
        self.start()

    def start(self) -> None:
        Path("/run/sshd").mkdir(exist_ok=True)
        self.process = subprocess.Popen(
            [
                SSHD,
                "-D",
                "-e",
                "-f",
                "/dev/null",
                "-p",
                str(self.port),
                "-h",
                str(self.host_key),
                "-o",
                "ListenAddress=127.0.0.1",
                "-o",
                f"AuthorizedKeysFile={self.folder}/authorized_keys",
                "-o",
                "StrictModes=no",
                "-o",
                "PidFile=none",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, timeout=10, interval=0.1, message="sshd did not listen")

    def reinstall(self) -> None:
        """As a reinstalled host: a new host key, the same address."""
        self.stop()
        self.host_key.unlink()
        self.host_key.with_suffix(".pub").unlink()
        _keygen(self.host_key)
        self.start()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def sshd(tmp_path):
    if not (os.path.exists(SSHD) and shutil.which("ssh-keyscan") and os.geteuid() == 0):
        pytest.skip("needs openssh-server and root (make fleet-packages)")
    server = Sshd(tmp_path / "host", sshtrust.identity().public_key)
    yield server
    server.stop()


def test_corral_makes_its_ssh_identity_once_readable_only_by_it(ssh_dir):
    first = sshtrust.identity()

    assert first.public_key.startswith("ssh-ed25519 AAAA")
    assert sshtrust.identity() == first
    assert first.private_key == ssh_dir / "id_ed25519"
    assert (first.private_key.stat().st_mode & 0o777) == 0o600
    assert first.fingerprint == _openssh_fingerprint(ssh_dir / "id_ed25519.pub")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "its type and its base64 key"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "Corral trusts host keys of the types"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        ("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==", "not a ssh-ed25519 key"),
    ],
)
def test_what_is_not_a_host_key_is_refused_with_the_reason(text, words):
    with pytest.raises(sshtrust.HostKeyError, match=words):
        sshtrust.host_key(text)


def test_a_qemu_ssh_host_is_opened_with_corrals_ssh_its_key_and_the_trusted_keys_only(
    make_host, tmp_path
):
    key = sshtrust.host_key(_keygen(tmp_path / "k"))
    host = make_host(uri="qemu+ssh://root@10.77.0.11:2222/system?no_tty=1", ssh_host_key=key)
    make_host(uri="qemu+ssh://root@kvm9.example.org/system")  # none trusted yet: not listed

    opened = sshtrust.connection_uri(host.uri)

    command = sshtrust.ssh_dir() / "ssh"
    assert opened == f"qemu+ssh://root@10.77.0.11:2222/system?no_tty=1&command={command}"
    assert (command.stat().st_mode & 0o777) == 0o700
    script = command.read_text()
    for option in (
        "-F /dev/null",  # no ssh configuration can name other known hosts or keys
        f"-i {sshtrust.identity().private_key}",
        f"UserKnownHostsFile={sshtrust.ssh_dir() / 'known_hosts'}",
        "GlobalKnownHostsFile=/dev/null",
        "StrictHostKeyChecking=yes",
        "BatchMode=yes",
    ):
        assert option in script
    known = (sshtrust.ssh_dir() / "known_hosts").read_text()
    assert known == f"[10.77.0.11]:2222 {key}\n"
    # A URI naming its own key or known hosts is its admin's to manage: opened as written.
    own = "qemu+ssh://root@kvm2.example.org/system?keyfile=/srv/corral/.ssh/id_ed25519"
    assert sshtrust.connection_uri(own) == own
    assert sshtrust.connection_uri("qemu:///system") == "qemu:///system"
    # An admin's URI may never name a command of its own.
    assert "command" in uris.refusal(f"qemu+ssh://root@10.77.0.11/system?command={command}")


def test_no_uri_may_turn_host_key_checks_off():
    assert "known_hosts_verify" in uris.refusal(
        "qemu+libssh://root@kvm1/system?known_hosts_verify=ignore"
    )


def test_a_new_ssh_host_waits_for_an_admin_to_trust_the_key_it_offers(
    sshd, make_host, admin_user, client_for, make_user, make_role, grant
):
    host = make_host(uri=f"qemu+ssh://root@127.0.0.1:{sshd.port}/system")
    offered = _openssh_fingerprint(sshd.host_key.with_suffix(".pub"))

    result = sync.sync_host(host.pk)

    host.refresh_from_db()
    assert result.host_status == host.status == HostStatus.ERROR
    assert "does not trust this host's SSH key yet" in host.status_detail
    assert offered in host.status_detail
    shown = client_for(admin_user).get(f"/api/hosts/{host.pk}/").json()
    assert shown["ssh_host_key_offered_fingerprint"] == offered
    assert shown["ssh_host_key_fingerprint"] == ""

    url = f"/api/hosts/{host.pk}/trust-host-key/"
    wrong = client_for(admin_user).post(url, {"fingerprint": "SHA256:" + "A" * 43}, format="json")
    assert wrong.status_code == 400
    assert offered in wrong.json()["fingerprint"][0]
    assert Host.objects.get(pk=host.pk).ssh_host_key == ""
    stranger = client_for(make_user()).post(url, {"fingerprint": offered}, format="json")
    assert stranger.status_code == 404
    viewer = make_user()
    grant(viewer, make_role("HostViewer", ["hosts.view_host"]).name, host.cluster)
    looked = client_for(viewer).post(url, {"fingerprint": offered}, format="json")
    assert looked.status_code == 403
    assert Host.objects.get(pk=host.pk).ssh_host_key == ""

    trusted = client_for(admin_user).post(url, {"fingerprint": offered}, format="json")

    assert trusted.status_code == 200, trusted.content
    assert trusted.json()["ssh_host_key_fingerprint"] == offered
    assert trusted.json()["ssh_host_key_offered_fingerprint"] == ""
    assert trusted.json()["status"] == HostStatus.CONNECTING
    event = Event.objects.filter(object_type="host", object_id=host.pk).latest("pk")
    assert admin_user.username in event.message and offered in event.message
    again = client_for(admin_user).post(url, {"fingerprint": offered}, format="json")
    assert again.status_code == 409
    assert "offers no SSH host key" in again.json()["detail"]


def test_a_host_whose_key_changed_is_refused_with_both_fingerprints(sshd, make_host):
    old = sshtrust.host_key(sshd.host_key.with_suffix(".pub").read_text())
    host = make_host(uri=f"qemu+ssh://root@127.0.0.1:{sshd.port}/system", ssh_host_key=old)
    sshd.reinstall()
    new = _openssh_fingerprint(sshd.host_key.with_suffix(".pub"))

    result = sync.sync_host(host.pk)

    host.refresh_from_db()
    assert result.host_status == host.status == HostStatus.ERROR
    assert "SSH key changed" in host.status_detail
    assert sshtrust.fingerprint(old) in host.status_detail and new in host.status_detail
    assert host.ssh_host_key == old  # still the one trusted until an admin says otherwise
    assert sshtrust.fingerprint(host.ssh_host_key_offered) == new


def test_corrals_public_key_is_shown_to_admins_only(admin_user, client_for, make_user):
    shown = client_for(admin_user).get("/api/hosts/ssh-identity/")

    assert shown.status_code == 200
    assert shown.json() == {
        "public_key": sshtrust.identity().public_key,
        "fingerprint": sshtrust.identity().fingerprint,
    }
    assert client_for(make_user()).get("/api/hosts/ssh-identity/").status_code == 404


def test_the_admin_page_shows_the_offered_key_and_trusts_it_with_a_button(
    sshd, make_host, admin_user
):
    host = make_host(uri=f"qemu+ssh://root@127.0.0.1:{sshd.port}/system", name=unique("kvm"))
    sync.sync_host(host.pk)
    offered = _openssh_fingerprint(sshd.host_key.with_suffix(".pub"))
    browser = Client()
    browser.force_login(admin_user)

    page = browser.get(f"/admin/hosts/host/{host.pk}/change/").content.decode()
    assert offered in page and "Trust this host key" in page
    assert sshtrust.identity().public_key in page
    done = browser.post(
        f"/admin/hosts/host/{host.pk}/trust-host-key/", {"trust_fingerprint": offered}
    )

    assert done.status_code == 302
    host.refresh_from_db()
    assert sshtrust.fingerprint(host.ssh_host_key) == offered
    assert host.ssh_host_key_offered == ""


def _trusthostkeys(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("trusthostkeys", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_trusthostkeys_reads_lists_and_trusts_the_keys_hosts_offer_for_a_scripted_upgrade(
    sshd, make_host, make_cluster, tmp_path
):
    cluster = make_cluster(unique("fleet"))
    unread = make_host(cluster, "kvm-1", uri=f"qemu+ssh://root@127.0.0.1:{sshd.port}/system")
    offering = make_host(cluster, "kvm-2", ssh_host_key_offered=_host_key(tmp_path / "o"))
    trusted = make_host(cluster, "kvm-3", ssh_host_key=_host_key(tmp_path / "t"))
    local = make_host(cluster, "kvm-4", uri="qemu:///system")
    offered = _openssh_fingerprint(sshd.host_key.with_suffix(".pub"))
    second = sshtrust.fingerprint(offering.ssh_host_key_offered)

    printed, complaints = _trusthostkeys("--all", "--yes")

    assert complaints == ""
    assert printed.splitlines() == [
        f"{cluster.name}/kvm-1  {offered}",  # read now: the sync had not yet
        f"{cluster.name}/kvm-2  {second}",
        f"{cluster.name}/kvm-3  left out: its key is trusted already "
        f"({sshtrust.fingerprint(trusted.ssh_host_key)})",
        f"{cluster.name}/kvm-4  left out: not reached over SSH with Corral's own key and known "
        "hosts",
        f"kvm-1: trusted {offered}",
        f"kvm-2: trusted {second}",
    ]
    assert sshtrust.fingerprint(Host.objects.get(pk=unread.pk).ssh_host_key) == offered
    assert Host.objects.get(pk=offering.pk).ssh_host_key == offering.ssh_host_key_offered
    assert Host.objects.get(pk=trusted.pk).ssh_host_key == trusted.ssh_host_key
    assert Host.objects.get(pk=local.pk).ssh_host_key == ""
    event = Event.objects.filter(object_type="host", object_id=unread.pk).latest("pk")
    assert "(manage.py trusthostkeys) trusted the SSH host key" in event.message
    assert offered in event.message


def test_trusthostkeys_asks_first_and_refuses_a_key_that_changed_while_it_asked(
    make_host, monkeypatch, tmp_path
):
    host = make_host(name="kvm-1", ssh_host_key_offered=_host_key(tmp_path / "first"))
    other = _host_key(tmp_path / "other")
    monkeypatch.setattr("builtins.input", lambda question: "n")

    printed, _ = _trusthostkeys("kvm-1")

    assert printed.splitlines()[-1] == "Nothing trusted."
    assert Host.objects.get(pk=host.pk).ssh_host_key == ""

    def changed_meanwhile(question: str) -> str:
        assert question == "Trust these 1 host key(s)? [y/N] "
        Host.objects.filter(pk=host.pk).update(ssh_host_key_offered=other)
        return "y"

    monkeypatch.setattr("builtins.input", changed_meanwhile)
    complaints = StringIO()
    with pytest.raises(CommandError, match="1 host"):
        call_command("trusthostkeys", "kvm-1", stdout=StringIO(), stderr=complaints)

    assert Host.objects.get(pk=host.pk).ssh_host_key == ""
    assert complaints.getvalue().startswith("kvm-1: not trusted: The host offers ")
    assert sshtrust.fingerprint(other) in complaints.getvalue()
    with pytest.raises(CommandError, match="No host named nowhere"):
        _trusthostkeys("kvm-1", "nowhere")
    with pytest.raises(CommandError, match="--all"):
        _trusthostkeys()


def _host_key(path: Path) -> str:
    return sshtrust.host_key(_keygen(path))

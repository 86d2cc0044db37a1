"""How a user reaches a guest's SSH server: the account, address and port Corral can name.

A VM on a libvirt network or a host bridge is reached at the address its guest reports (the
guest agent, or the network's DHCP leases), port 22. A VM with only a user-mode NIC is
reachable from nowhere, unless its host publishes guests' SSH ports (a host with a guest SSH
port range): a host on Corral's own machine on its loopback (``ssh -p PORT user@127.0.0.1``),
a remote host on every address it has, named by the host name of its URI (``ssh -p PORT
user@kvm1``). The port is chosen when the VM starts on the host (``claim_port``) among those of
the range that no other VM there holds (and, on Corral's machine, nothing listens on).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import asdict, dataclass

from django.db import transaction

from hosts.driver.uris import is_local
from hosts.guests.consoles import console_address, listen_address
from hosts.models import Host, Job, JobKind, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES

SSH_PORT = 22
LOOPBACK = "127.0.0.1"
# Statuses in which the guest runs and so answers SSH.
REACHABLE = (VmStatus.UP, VmStatus.MIGRATING)


@dataclass(frozen=True)
class SshDetails:
    user: str
    host: str
    port: int
    command: str

    def as_dict(self) -> dict:
        return asdict(self)


def ssh_command(user: str, host: str, port: int) -> str:
    address = f"[{host}]" if ":" in host else host
    if port == SSH_PORT:
        return f"ssh {user}@{address}"
    return f"ssh -p {port} {user}@{address}"


def details(vm: VirtualMachine) -> SshDetails | None:
    """Where the VM's holder logs in, or None while Corral cannot name it (the template names
    no login account, the VM does not run, or its guest has no address one can reach)."""
    if vm.status not in REACHABLE or vm.host_id is None:
        return None
    user = vm.template.login_user
    if not user:
        return None
    if vm.ssh_port:
        host = console_address(vm.host.uri)
        return SshDetails(user, host, vm.ssh_port, ssh_command(user, host, vm.ssh_port))
    if not (vm.template.networks or vm.template.bridge):
        return None  # a user-mode NIC's address (10.0.2.15) leads nowhere
    address = reachable_address(vm.ip_addresses)
    if address is None:
        return None
    return SshDetails(user, address, SSH_PORT, ssh_command(user, address, SSH_PORT))


def reachable_address(addresses: list[str]) -> str | None:
    """The first global or private address: IPv4 before IPv6, never loopback or link-local."""
    found = []
    for text in addresses or []:
        try:
            address = ipaddress.ip_address(str(text).split("/")[0])
        except ValueError:
            continue
        if address.is_loopback or address.is_link_local or address.is_multicast:
            continue
        found.append(address)
    found.sort(key=lambda address: address.version)
    return str(found[0]) if found else None


def claim_port(vm: VirtualMachine, host: Host) -> int | None:
    """A port of ``host``'s guest SSH range for ``vm`` (None when the host publishes none).

    Starting on ``host`` (the VM already placed there), the port is recorded on the VM with the
    host's row locked, so two VMs starting there at once take different ones. Moving there (a
    migration), it is only chosen: the migration records it once it succeeds.
    """
    if host.guest_ssh_port_min is None or host.guest_ssh_port_max is None:
        return None
    with transaction.atomic():
        Host.objects.select_for_update().filter(pk=host.pk).values_list("pk").first()
        taken = set(
            VirtualMachine.objects.filter(host=host, ssh_port__isnull=False)
            .exclude(pk=vm.pk)
            .exclude(status=VmStatus.DOWN)  # no QEMU of its holds the port
            .values_list("ssh_port", flat=True)
        )
        if vm.host_id == host.pk and vm.ssh_port and vm.ssh_port not in taken:
            candidates = [vm.ssh_port]  # its own from an earlier start, if still free
        else:
            candidates = []
        candidates += range(host.guest_ssh_port_min, host.guest_ssh_port_max + 1)
        port = next((p for p in candidates if p not in taken and _free(p, host)), None)
        if port is None:
            return None
        if vm.host_id == host.pk:
            VirtualMachine.objects.filter(pk=vm.pk).update(ssh_port=port)
            vm.ssh_port = port
    return port


def forward_listen_address(host: Host) -> str:
    """Where a guest's forwarded SSH port listens on ``host``: its loopback when the host is on
    Corral's own machine, every address of a remote host (its URI's host name leads there):
    where its screen listens too."""
    return listen_address(host.uri)


def _free(port: int, host: Host) -> bool:
    """Nothing on this machine listens on ``port`` of the loopback, for a host on Corral's
    machine; a remote host's ports are not probed (QEMU refuses to start on one taken, and the
    start goes on to another host as the policy says)."""
    if not is_local(host.uri):
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class KeysState:
    """Whether the holder's SSH keys are in the running guest: ``state`` is ``in_guest``,
    ``pending`` (a job puts them there), ``not_in_guest`` (``message`` says why) or ``at_boot``
    (the template has its guests take keys only from cloud-init's seed, at boot).

    One truth with the ``guest_keys`` jobs: while one is queued or running the keys are
    pending; after it, the VM holds what it recorded (``hosts.guests.keys``): in the guest when
    it succeeded, not in it, with the words of its failure, when it failed."""

    state: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def keys_state(vm: VirtualMachine, viewer_id: int | None = None) -> KeysState | None:
    """What the VM's pages say of its holder's keys in the guest (to the holder, ``viewer_id``,
    of "your" keys; to anyone else of its user's); None when nobody holds it or it does not
    run."""
    if vm.owner_id is None or vm.status not in REACHABLE:
        return None
    whose = "your" if viewer_id == vm.owner_id else "its user's"
    login_user, guest_agent = _login_of(vm)
    if not login_user or not guest_agent:
        return KeysState(
            "at_boot",
            f"{whose.capitalize()} SSH keys reach this VM through cloud-init when it boots; a "
            "guest already running when it was taken gets them at its next boot.",
        )
    pending = KeysState("pending", f"Putting {whose} SSH keys in the guest…")
    if _keys_job_active(vm):
        return pending
    if vm.guest_keys_of == vm.owner_id and vm.guest_keys_at is not None:
        if vm.guest_keys_note:
            return KeysState("not_in_guest", vm.guest_keys_note)
        return KeysState(
            "in_guest",
            f"{whose.capitalize()} SSH keys are in the guest's account {login_user}.",
        )
    return pending


def _login_of(vm: VirtualMachine) -> tuple[str, bool]:
    """The VM's template's login account and whether its guests run the agent: from the
    allocation's pick (``template_login_user``, ``template_guest_agent``) when it read them,
    else from its template (one query unless the caller read it)."""
    annotated = getattr(vm, "template_guest_agent", None)
    if annotated is not None:
        return vm.template_login_user or "", bool(annotated)
    return vm.template.login_user, vm.template.guest_agent


def _keys_job_active(vm: VirtualMachine) -> bool:
    """A ``guest_keys`` job is queued or running on the VM: from its ``keys_job_active``
    annotation (the API) or its ``active_jobs`` (the VM pages) when the caller read them, else
    one query."""
    annotated = getattr(vm, "keys_job_active", None)
    if annotated is not None:
        return annotated
    active = getattr(vm, "active_jobs", None)
    if active is not None:
        return any(job.kind == JobKind.GUEST_KEYS for job in active)
    return Job.objects.filter(vm=vm, kind=JobKind.GUEST_KEYS, state__in=ACTIVE_JOB_STATES).exists()

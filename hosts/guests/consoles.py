"""Where a VM's screen (VNC) and serial terminal are reached from Corral's web tier, and the
one-time tickets that let a user open them (a ticket opens the one kind of console it was
issued for).

A local host (a ``qemu:///…`` or ``qemu+unix://`` URI, no host name) has its guests' VNC
listen on the loopback only; a remote host's listen on every address of the host, and Corral
connects to the host name of its URI. Every guest's screen is locked from its definition on (a
VNC password nobody is told); opening a console sets a new random password on it, valid
``CORRAL_CONSOLE_CREDENTIAL_SECONDS`` (``screen_credential``), which only the relay holds and
uses to authenticate: the browser never sees it, and whoever merely reaches the host's VNC
ports is refused. The websocket relay connects only to the address and port of the VM's
screen on its host (``redeem_ticket``), never to one a client names.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts import driver
from hosts.driver.base import VNC_PASSWORD_LENGTH
from hosts.driver.uris import host_name, is_local
from hosts.error_codes import HostErrorCode
from hosts.models import ConsoleKind, ConsoleTicket, VirtualMachine, VmStatus
from project.access.permissions import holds
from project.errors import Refused

OPERATE = "hosts.operate_virtualmachine"
# VNC display ports: libvirt's autoport starts at 5900.
MIN_VNC_PORT = 5900
MAX_PORT = 65535
LOOPBACK = "127.0.0.1"


def listen_address(uri: str) -> str:
    """The address a guest's VNC listens on, for a host at ``uri``."""
    return LOOPBACK if is_local(uri) else "0.0.0.0"


def console_address(uri: str) -> str:
    """The address Corral connects to for the screens of the guests of the host at ``uri``."""
    return LOOPBACK if is_local(uri) else host_name(uri)


@dataclass(frozen=True)
class SerialTarget:
    """Where the serial relay connects for one redeemed ticket: the VM's host and domain."""

    vm_id: int
    uri: str
    uuid: str
    storage_pool: str = ""


@dataclass(frozen=True)
class ConsoleTarget:
    """Where the relay connects for one redeemed ticket: the VM's host, its VNC port, and the
    password that opens it (valid seconds, known to the relay alone)."""

    vm_id: int
    address: str
    port: int
    password: str = field(repr=False, default="")


def _refuse_unless_running(vm: VirtualMachine, code: HostErrorCode, what: str) -> None:
    if vm.status not in (VmStatus.UP, VmStatus.PAUSED) or vm.host_id is None:
        raise Refused(
            code,
            f"VM {vm.name} is {vm.get_status_display().lower()}; its {what} opens while it runs.",
        )


def issue_ticket(vm: VirtualMachine, user) -> tuple[str, datetime]:
    """A one-time ticket for ``user`` to open ``vm``'s screen; returns it and its expiry.

    The caller has checked that ``user`` may operate the VM. Refused when the VM shows no
    screen now (not running, no VNC, or its port not read from its host yet).
    """
    _refuse_unless_running(vm, HostErrorCode.CONSOLE_UNAVAILABLE, "console")
    if not vm.graphics_port:
        raise Refused(
            HostErrorCode.CONSOLE_UNAVAILABLE,
            f"VM {vm.name} has no screen Corral knows of yet (no VNC, or its port is not read "
            "from its host yet); try again in a few seconds.",
        )
    return _new_ticket(vm, user, ConsoleKind.SCREEN)


def issue_serial_ticket(vm: VirtualMachine, user) -> tuple[str, datetime]:
    """A one-time ticket for ``user`` to open ``vm``'s serial terminal; returns it and its
    expiry. The caller has checked that ``user`` may operate the VM. Refused when the VM is
    not running, or its host gives guests no serial console."""
    _refuse_unless_running(vm, HostErrorCode.TERMINAL_UNAVAILABLE, "serial terminal")
    why_not = no_terminal(vm)
    if why_not:
        raise Refused(HostErrorCode.TERMINAL_UNAVAILABLE, why_not)
    return _new_ticket(vm, user, ConsoleKind.SERIAL)


def no_terminal(vm: VirtualMachine) -> str:
    """Why the VM, placed on a host, has no serial terminal whatever it does ("" when it has
    one): its host gives guests no serial console. Read from the host's URI: no call to it."""
    if vm.host is None or driver.has_serial_consoles(vm.host.uri):
        return ""
    return (
        f"VM {vm.name} has no terminal: its host {vm.host.name} gives its guests no serial "
        "console (simulated hosts have none)."
    )


def _new_ticket(vm: VirtualMachine, user, kind: ConsoleKind) -> tuple[str, datetime]:
    token = secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(seconds=settings.CORRAL_CONSOLE_TICKET_SECONDS)
    with transaction.atomic():
        ConsoleTicket.objects.filter(expires_at__lt=timezone.now()).delete()
        ConsoleTicket.objects.create(
            digest=_digest(token), kind=kind, vm=vm, user=user, expires_at=expires_at
        )
    return token, expires_at


def waiting_ticket(token: str) -> ConsoleTicket | None:
    """The screen ticket ``token`` is, while it may still be redeemed (unused, unexpired);
    reading it does not use it."""
    if not token or len(token) > 100:
        return None
    return (
        ConsoleTicket.objects.select_related("vm")
        .filter(
            digest=_digest(token),
            kind=ConsoleKind.SCREEN,
            used_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .first()
    )


def redeem_ticket(token: str, user) -> VirtualMachine | None:
    """The VM (with its host) whose screen ``token`` opens, once: None when the ticket is
    unknown, used, expired, another signed-in user's, not a screen's, or its user may no longer
    operate the VM or it shows no screen. The database only: the relay then asks the host for
    the screen's credential (``screen_credential``), off the database's thread.

    ``user`` is who holds the websocket: the ticket's user, or anonymous (the ticket then is
    the only credential: secret, single use, valid seconds).
    """
    vm = _redeem(token, user, ConsoleKind.SCREEN)
    if vm is None or not vm.graphics_port:
        return None
    return vm


def vm_on_its_host(vm_id: int) -> VirtualMachine | None:
    """The VM ``vm_id`` with the host it is on now (None when it is on none)."""
    vm = VirtualMachine.objects.select_related("host").filter(pk=vm_id).first()
    return vm if vm is not None and vm.host is not None else None


def screen_credential(vm: VirtualMachine) -> ConsoleTarget | None:
    """A new password for the running VM's screen, set on its host and valid
    ``CORRAL_CONSOLE_CREDENTIAL_SECONDS`` (the one it had stops working; a connection already
    open stays), with the screen's port there: where the relay connects. None when the VM
    shows no screen on its host now. ``DriverError`` when the host cannot be asked. A call to
    the VM's host (loaded with the VM), no database query."""
    password = secrets.token_urlsafe(6)[:VNC_PASSWORD_LENGTH]
    valid_until = timezone.now() + timedelta(seconds=settings.CORRAL_CONSOLE_CREDENTIAL_SECONDS)
    port = driver.set_screen_password(vm.host.uri, str(vm.uuid), password, valid_until)
    if port is None or not MIN_VNC_PORT <= port <= MAX_PORT:
        return None
    return ConsoleTarget(
        vm_id=vm.pk, address=console_address(vm.host.uri), port=port, password=password
    )


def redeem_serial_ticket(token: str, user) -> SerialTarget | None:
    """The serial terminal ``token`` opens, once: None as for ``redeem_ticket`` (and for a
    screen's ticket)."""
    vm = _redeem(token, user, ConsoleKind.SERIAL)
    if vm is None:
        return None
    return SerialTarget(
        vm_id=vm.pk, uri=vm.host.uri, uuid=str(vm.uuid), storage_pool=vm.host.storage_pool
    )


def _redeem(token: str, user, kind: ConsoleKind) -> VirtualMachine | None:
    """Mark the ticket used (whatever follows) and return its VM, on its host, when its user
    may still operate it."""
    now = timezone.now()
    with transaction.atomic():
        ticket = (
            ConsoleTicket.objects.select_for_update()
            .filter(
                digest=_digest(token or ""), kind=kind, used_at__isnull=True, expires_at__gt=now
            )
            .first()
        )
        if ticket is None:
            return None
        if getattr(user, "is_authenticated", False) and user.pk != ticket.user_id:
            return None
        ConsoleTicket.objects.filter(pk=ticket.pk).update(used_at=now)
    vm = VirtualMachine.objects.select_related("host", "owner").filter(pk=ticket.vm_id).first()
    if vm is None or vm.host is None or not holds(ticket.user, OPERATE, vm):
        return None
    return vm


def ticket_url(request, websocket: str, ticket: str) -> str:
    """The websocket URL that redeems ``ticket``, on the host and scheme ``request`` came by
    (``websocket``: ``console`` for the screen, ``serial`` for the terminal)."""
    scheme = "wss" if request.is_secure() else "ws"
    return f"{scheme}://{request.get_host()}/ws/{websocket}/{ticket}/"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()

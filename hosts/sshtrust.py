"""Hosts reached over SSH: Corral's own SSH identity, and the host keys it trusts.

Corral reaches a ``qemu+ssh://`` host with a key pair of its own (``identity``, made once under
``CORRAL_SSH_DIR``: its public key goes in the host's ``authorized_keys``) and trusts only the
host key an admin confirmed for that host (``Host.ssh_host_key``), never whatever the service
user's ``~/.ssh/known_hosts`` holds. Until an admin confirms one, the key the host offers is
kept beside it (``ssh_host_key_offered``, read with ``ssh-keyscan``), with its SHA-256
fingerprint for the admin to compare, and Corral does not connect; a host whose key changed
is refused (libvirt says so) and shows the trusted and the offered fingerprints.

libvirt's ``ssh`` transport runs the ``ssh`` program, which reads known hosts from the ssh
configuration only; so a ``qemu+ssh`` URI is opened with ``command=`` naming Corral's own ssh
command (``ssh_command``, a script in ``CORRAL_SSH_DIR``): OpenSSH with Corral's key, Corral's
known-hosts file (written from the database before each connection) and no ssh configuration
at all (``connection_uri``, registered with the host driver). libvirt's in-process ``libssh``
transport, which takes a known-hosts file itself, is not used: in libvirt 9.0 a reply over
about 1 KB (the host's domain capabilities, a domain's XML) arrives over it only at the
connection's next keepalive, up to 5 s later (docs/benchmarks.md, "Remote hosts over SSH");
it crashes the process in remote calls on a host with a running guest; and it reads
the system's ssh_config, whose ``UserKnownHostsFile`` takes the place of the file it is given.
A URI that names its own ``keyfile`` or ``known_hosts`` is opened as written (its admin
manages the trust), as is one over ``libssh`` or ``libssh2``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from hosts.driver import uris

if TYPE_CHECKING:
    from hosts.models import Host

logger = logging.getLogger(__name__)

# Host key types Corral trusts, the one it keeps first when a host offers several.
KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
SCAN_TIMEOUT_S = 5
KEY_NAME = "id_ed25519"
MANAGED_TRANSPORTS = ("ssh",)
OWN_TRUST = ("keyfile", "known_hosts")


class HostKeyError(Exception):
    """A host key that is not one, or a host whose key could not be read; says why."""


@dataclass(frozen=True)
class Identity:
    """Corral's SSH key pair: the private key's file, the public key's line and fingerprint."""

    private_key: Path
    public_key: str
    fingerprint: str


def ssh_dir() -> Path:
    return Path(settings.CORRAL_SSH_DIR)


def identity() -> Identity:
    """Corral's SSH identity, made the first time it is asked for (an Ed25519 key, readable
    only by Corral's user); every process and machine sharing ``CORRAL_SSH_DIR`` uses it."""
    folder = ssh_dir()
    private, public = folder / KEY_NAME, folder / f"{KEY_NAME}.pub"
    if not public.exists():
        _make_identity(folder, private, public)
    line = public.read_text().strip()
    return Identity(private_key=private, public_key=line, fingerprint=fingerprint(line))


def _make_identity(folder: Path, private: Path, public: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    line = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    try:  # the first process to get here makes it; the others read it
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _wait_for(public)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    _write_atomically(public, line.decode() + f" corral@{os.uname().nodename}\n", 0o644)
    logger.info("Made Corral's SSH identity %s (%s)", private, fingerprint(line.decode()))


def _wait_for(path: Path) -> None:
    import time

    for _ in range(50):
        if path.exists():
            return
        time.sleep(0.1)
    raise HostKeyError(f"{path} was not written: another process is making Corral's SSH key")


def host_key(text: str) -> str:
    """``text`` as a host key line Corral keeps (``type base64``, no comment); ``HostKeyError``
    saying why when it is not one of ``KEY_TYPES``."""
    parts = (text or "").split()
    if len(parts) < 2:
        raise HostKeyError("A host key is its type and its base64 key, e.g. ssh-ed25519 AAAA….")
    kind, encoded = parts[0], parts[1]
    if kind not in KEY_TYPES:
        raise HostKeyError(f"Corral trusts host keys of the types {', '.join(KEY_TYPES)}.")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HostKeyError("The host key is not valid base64.") from exc
    length = int.from_bytes(blob[:4], "big")
    if blob[4 : 4 + length] != kind.encode():
        raise HostKeyError(f"The host key's data is not a {kind} key.")
    return f"{kind} {encoded}"


def fingerprint(key: str) -> str:
    """The key's SHA-256 fingerprint as OpenSSH shows it (``SHA256:…``); "" for no key."""
    if not key:
        return ""
    blob = base64.b64decode(key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def managed(uri: str) -> uris.SshTarget | None:
    """Where the host at ``uri`` is reached over SSH with Corral's identity and trust; None
    when it is not (no SSH, ``libssh2``, or the URI names its own key or known hosts)."""
    target = uris.ssh_target(uri)
    if target is None or target.transport not in MANAGED_TRANSPORTS:
        return None
    if any(name in target.parameters for name in OWN_TRUST):
        return None
    return target


def scan(uri: str) -> str:
    """The host key the SSH server at ``uri`` offers, the first of ``KEY_TYPES`` it has
    (``ssh-keyscan``, bounded); ``HostKeyError`` when it offers none or cannot be reached."""
    target = uris.ssh_target(uri)
    if target is None:
        raise HostKeyError("The host is not reached over SSH.")
    # The host name passed the URI allowlist (a DNS name or an address, never '-…'); "--"
    # ends the options all the same.
    command = [
        "ssh-keyscan",
        "-T",
        str(SCAN_TIMEOUT_S),
        "-p",
        str(target.port),
        "-t",
        "ed25519,ecdsa,rsa",
        "--",
        target.host,
    ]
    try:
        found = subprocess.run(
            command, capture_output=True, text=True, timeout=SCAN_TIMEOUT_S * 3, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostKeyError(f"Could not read the host key of {target.host}: {exc}") from exc
    offered = {}
    for line in found.stdout.splitlines():
        if line.startswith("#"):
            continue
        try:
            key = host_key(line.split(None, 1)[1] if " " in line else "")
        except HostKeyError:
            continue
        offered[key.split()[0]] = key
    for kind in KEY_TYPES:
        if kind in offered:
            return offered[kind]
    raise HostKeyError(
        f"{target.host} port {target.port} offered no SSH host key (no SSH server answers "
        "there, or the network does not reach it)."
    )


def known_hosts_line(target: uris.SshTarget, key: str) -> str:
    where = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
    return f"{where} {key}\n" if key else ""


def connection_uri(uri: str) -> str:
    """The URI libvirt opens for the host at ``uri``: for a managed SSH host, over libvirt's
    ``ssh`` transport with Corral's own ssh command (``ssh_command``: Corral's key, Corral's
    known hosts written from the database first, no ssh configuration read); ``uri`` itself
    for any other. The URI the admin gave passed the allowlist; the one parameter added,
    ``command``, names Corral's own file."""
    target = managed(uri)
    if target is None:
        return uri
    write_known_hosts()
    parameters = {"command": str(ssh_command())}
    if "no_tty" not in target.parameters:
        parameters["no_tty"] = "1"
    return uris.with_transport(uri, "ssh", parameters)


def write_known_hosts() -> Path:
    """Corral's known-hosts file: the key trusted for each managed SSH host, from the
    database (rewritten when it changed)."""
    from hosts.models import Host

    lines = []
    for uri, key in (
        Host.objects.exclude(ssh_host_key="").order_by("pk").values_list("uri", "ssh_host_key")
    ):
        target = managed(uri)
        if target is not None:
            lines.append(known_hosts_line(target, key))
    path = ssh_dir() / "known_hosts"
    wanted = "".join(lines)
    if not path.exists() or path.read_text() != wanted:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_atomically(path, wanted, 0o600)
    return path


def ssh_command() -> Path:
    """The ssh libvirt runs for managed hosts (written once per folder): OpenSSH with Corral's
    key only, Corral's known hosts only, strict host key checking, no prompt, keepalives, and
    ``-F /dev/null`` so that no ssh configuration (the system's or the service user's) can
    name other known hosts or keys."""
    path = ssh_dir() / "ssh"
    key, known = identity().private_key, ssh_dir() / "known_hosts"
    options = [
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        f"UserKnownHostsFile={known}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
    ]
    script = (
        "#!/bin/sh\n"
        "# Written by Corral (hosts/sshtrust.py): the ssh libvirt runs for hosts Corral\n"
        "# reaches over SSH with its own key and the host keys an admin trusted.\n"
        f'exec ssh {" ".join(shlex.quote(option) for option in options)} "$@"\n'
    )
    if not path.exists() or path.read_text() != script:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_atomically(path, script, 0o700)
    return path


def _write_atomically(path: Path, text: str, mode: int) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# -- what admins do: see the key a host offers, and trust it ---------------------------------


def record_offered(host) -> str:
    """Read the key the managed SSH host ``host`` offers and keep it as offered when it is not
    the trusted one (cleared when it is); returns it. ``HostKeyError`` when it offers none."""
    from hosts.models import Host

    offered = scan(host.uri)
    kept = "" if offered == host.ssh_host_key else offered
    if kept != host.ssh_host_key_offered:
        Host.objects.filter(pk=host.pk).update(ssh_host_key_offered=kept)
        host.ssh_host_key_offered = kept
    return offered


def untrusted_detail(host) -> str:
    """What the host's status says while Corral does not trust the key it offers."""
    offered = fingerprint(host.ssh_host_key_offered)
    if host.ssh_host_key:
        return (
            f"The host's SSH key changed: Corral trusts {fingerprint(host.ssh_host_key)}, the "
            f"host offers {offered}. If the host was reinstalled, compare the new fingerprint "
            "with the host's own (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and trust "
            "it; otherwise something else answers at its address."
        )
    return (
        f"Corral does not trust this host's SSH key yet: compare its fingerprint {offered} with "
        "the host's own (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then trust it."
    )


def trust_offered_key(
    host, confirmed_fingerprint: str, *, by=None, by_name: str = "", replacing: str | None = None
):
    """Trust the key ``host`` offers, as an admin who compared its fingerprint
    (``confirmed_fingerprint``, which must be the offered key's: a key that changed again since
    is not trusted by mistake). The host is connected to again at its next sync; the change is
    recorded as an event naming the admin (``by``, or ``by_name`` for who is not a Corral user:
    a command's) and both fingerprints. ``replacing``: the fingerprint of the key trusted now
    as it was shown ("" for none); when given, a host that has another trusted since is not
    changed. ``Refused``: 409 when the host offers no key to trust or trusts another than
    ``replacing``, on the field ``fingerprint`` (400) when the offered key differs."""
    from django.db import transaction
    from django.utils import timezone

    from hosts.error_codes import HostErrorCode
    from hosts.models import Host, HostStatus
    from project import events
    from project.errors import Refused
    from project.events import EventKind

    with transaction.atomic():
        host = Host.objects.select_for_update(no_key=True).get(pk=host.pk)
        if not host.ssh_host_key_offered:
            raise Refused(
                HostErrorCode.NO_HOST_KEY_OFFERED,
                f"Host {host.name} offers no SSH host key Corral does not trust already.",
            )
        offered = fingerprint(host.ssh_host_key_offered)
        if (confirmed_fingerprint or "").strip() != offered:
            raise Refused(
                HostErrorCode.HOST_KEY_NOT_OFFERED,
                f"The host offers {offered}: confirm that fingerprint, after comparing it with "
                "the host's own.",
                field="fingerprint",
            )
        before = fingerprint(host.ssh_host_key)
        if replacing is not None and before != replacing:
            raise Refused(
                HostErrorCode.TRUSTED_KEY_CHANGED,
                f"Corral trusts {before} for host {host.name} since: compare the key it offers "
                "and trust it on the host's own page.",
            )
        Host.objects.filter(pk=host.pk).update(
            ssh_host_key=host.ssh_host_key_offered,
            ssh_host_key_offered="",
            status=HostStatus.CONNECTING,
            status_detail="",
            updated_at=timezone.now(),
        )
        who = by.get_username() if by is not None else by_name
        replaced = f" in place of {before}" if before else ""
        events.emit(
            EventKind.CHANGED,
            "host",
            host.pk,
            f"{who or 'Corral'} trusted the SSH host key {offered} of host {host.name}{replaced}",
            {"ssh_host_key_fingerprint": offered, "replaced": before, "trusted_by": who},
            cluster_id=host.cluster_id,
            user_id=getattr(by, "pk", None),
        )
    host.refresh_from_db()
    return host


@dataclass(frozen=True)
class OfferedKey:
    """A host of a trust of many (``offered_keys``): the fingerprint of the key it offers, to
    be trusted, or why it is left out (``skipped``)."""

    host: Host
    fingerprint: str = ""
    skipped: str = ""


def awaits_first_key(host) -> bool:
    """Whether ``host`` is a managed SSH host with no key trusted yet (newly added, or from a
    release before host-key trust): Corral does not connect until one is."""
    return not host.ssh_host_key and managed(host.uri) is not None


def offered_keys(hosts) -> list[OfferedKey]:
    """What trusting the keys ``hosts`` offer does, host by host in the order given: trust the
    key each offers when Corral trusts none for it yet; else it is left out, saying why (not
    reached with Corral's SSH trust; a key that changed, which is trusted on the host's own
    page after comparing, never in a batch; trusted already; no key read from it yet). The
    database only: the admin's action and ``manage.py trusthostkeys`` list this, then trust
    each fingerprint listed with ``trust_offered_key(..., replacing="")``."""
    listed = []
    for host in hosts:
        offered = fingerprint(host.ssh_host_key_offered)
        if managed(host.uri) is None:
            skipped = "not reached over SSH with Corral's own key and known hosts"
        elif host.ssh_host_key and offered:
            skipped = (
                f"its key changed (Corral trusts {fingerprint(host.ssh_host_key)}, it offers "
                f"{offered}): compare it and trust it on the host's own page"
            )
        elif host.ssh_host_key:
            skipped = f"its key is trusted already ({fingerprint(host.ssh_host_key)})"
        elif not offered:
            skipped = (
                "no key read from it yet: Corral reads it at the host's next sync (none if "
                "nothing answers there)"
            )
        else:
            listed.append(OfferedKey(host, fingerprint=offered))
            continue
        listed.append(OfferedKey(host, skipped=skipped))
    return listed


# -- what the sync asks before and after it connects ----------------------------------------


def refusal(host) -> str | None:
    """Why Corral does not connect to ``host`` now (its status detail): a managed SSH host with
    no trusted key. The key it offers is read once (``ssh-keyscan``), not at every sync: a key
    that changes again before an admin trusts it fails the connection, which reads it anew
    (``changed_key``). None when it may connect, or when the host offers no key (it is
    unreachable; the connection says so)."""
    if not awaits_first_key(host):
        return None
    if host.ssh_host_key_offered:
        return untrusted_detail(host)
    try:
        record_offered(host)
    except HostKeyError:
        return None
    return untrusted_detail(host)


def changed_key(host, error_text: str) -> str | None:
    """After a connection to ``host`` failed: why, when it is that the host's key is no longer
    the trusted one (the key it offers now is kept for an admin to compare); None otherwise.
    Only asked when libvirt's words are about the host key (or ssh's warning, too long for
    libvirt, was cut), so a host that is merely down costs no scan."""
    if not host.ssh_host_key or managed(host.uri) is None:
        return None
    # ssh's warning of a changed key is longer than the 1 KiB libvirt keeps of what ssh
    # prints, which it then reports as "Value too large for defined data type".
    words = error_text.lower()
    if "key" not in words and "value too large" not in words:
        return None
    try:
        offered = record_offered(host)
    except HostKeyError:
        return None
    return None if offered == host.ssh_host_key else untrusted_detail(host)

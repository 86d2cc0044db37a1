"""Trust the SSH host keys hosts offer, from the command line: for an upgrade that left every
qemu+ssh host waiting for its key to be trusted, scripted or not. The same rules as the
admin console's action (``sshtrust.offered_keys``, ``sshtrust.trust_offered_key``)."""

from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand, CommandError

from hosts import sshtrust
from hosts.models import Host
from project.errors import Refused


class Command(BaseCommand):
    help = (
        "Trust the SSH host key each named host (or every host, --all) offers, when Corral "
        "trusts none for it yet: lists each with the SHA-256 fingerprint of its key, or why it "
        "is left out, asks, then trusts exactly those. A host whose key the sync has not read "
        "yet is read now (ssh-keyscan). A key that changed is left out: trust it on the host's "
        "own page after comparing."
    )

    def add_arguments(self, parser):
        parser.add_argument("hosts", nargs="*", metavar="HOST", help="host names")
        parser.add_argument("--all", action="store_true", dest="every", help="every host")
        parser.add_argument(
            "--yes", action="store_true", help="trust without asking (scripted upgrades)"
        )

    def handle(self, *args, hosts: list[str], every: bool, yes: bool, **options):
        chosen = self._hosts(hosts, every=every)
        for host in chosen:
            self._read_offered_key(host)
        listed = sshtrust.offered_keys(chosen)
        for item in listed:
            where = f"{item.host.cluster.name}/{item.host.name}"
            self.stdout.write(f"{where}  {item.fingerprint or 'left out: ' + item.skipped}")
        to_trust = [item for item in listed if item.fingerprint]
        if not to_trust:
            self.stdout.write("No host key to trust.")
            return
        if not yes and not _confirmed(f"Trust these {len(to_trust)} host key(s)? [y/N] "):
            self.stdout.write("Nothing trusted.")
            return
        by = f"{getpass.getuser()} (manage.py trusthostkeys)"
        refused = 0
        for item in to_trust:
            try:
                sshtrust.trust_offered_key(item.host, item.fingerprint, by_name=by, replacing="")
            except Refused as exc:
                refused += 1
                self.stderr.write(f"{item.host.name}: not trusted: {exc.message}")
                continue
            self.stdout.write(f"{item.host.name}: trusted {item.fingerprint}")
        if refused:
            raise CommandError(f"{refused} host(s) not trusted.")

    def _hosts(self, names: list[str], *, every: bool) -> list[Host]:
        if every == bool(names):
            raise CommandError("Name the hosts, or give --all.")
        hosts = Host.objects.select_related("cluster").order_by("cluster__name", "name")
        if every:
            return list(hosts)
        chosen = list(hosts.filter(name__in=names))
        unknown = sorted(set(names) - {host.name for host in chosen})
        if unknown:
            raise CommandError(f"No host named {', '.join(unknown)}.")
        return chosen

    def _read_offered_key(self, host: Host) -> None:
        """Read the key a host awaiting its first offers, when the sync has not yet."""
        if not sshtrust.awaits_first_key(host) or host.ssh_host_key_offered:
            return
        try:
            sshtrust.record_offered(host)
        except sshtrust.HostKeyError as exc:
            self.stderr.write(f"{host.name}: {exc}")


def _confirmed(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:  # no terminal to ask on: not a yes
        return False

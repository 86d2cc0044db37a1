"""manage.py fleethosts up N [--shared-storage] [--cluster NAME] | down | list | cut HOST |
rejoin HOST — fleet hosts (lab/fleethosts.py): hosts on a network of their own, reached over SSH.

Root only: each host is a network, mount and UTS namespace of this machine with its own sshd and
system libvirtd, reached as ``qemu+ssh://root@ADDRESS/system``. ``up`` registers them as Hosts.
While they run, ``ssh -i <fleet folder>/client_key root@ADDRESS`` logs in to one as Corral does.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hosts import driver
from hosts.models import Cluster, Host
from hosts.sync import sync_host
from lab import fleethosts, leftovers


class Command(BaseCommand):
    help = (
        "Start N fleet hosts (each in namespaces of its own on a bridge, with its own address, "
        "sshd and system libvirtd) and register them as Hosts reached over SSH; take them "
        "down; list them; cut one off the network or join it again."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        up = sub.add_parser("up", help="start N fleet hosts and register them (idempotent)")
        up.add_argument("count", type=int)
        up.add_argument(
            "--shared-storage",
            action="store_true",
            help="one folder bound into every host, holding every host's storage pool",
        )
        up.add_argument("--cluster", default="fleet", help="cluster to register them in")
        sub.add_parser("down", help="take every fleet host down (their Hosts stay registered)")
        sub.add_parser("list", help="list the fleet hosts and whether they run")
        for action, what in (("cut", "cut a host off the network"), ("rejoin", "join it again")):
            sub.add_parser(action, help=what).add_argument("host", help="its name (fleet-N)")

    def handle(self, *args, action: str, **options):
        if action == "up":
            self.up(options["count"], options["shared_storage"], options["cluster"])
        elif action == "down":
            for name in fleethosts.down():
                self.stdout.write(f"{name}: taken down")
        elif action == "list":
            fleet = fleethosts.discover()
            for host in fleet.hosts if fleet else ():
                state = "running" if host.running() else "stopped"
                state += ", cut off" if host.cut_off() else ""
                self.stdout.write(f"{host.name}: {state}  {host.managed_uri}")
        else:
            fleet = fleethosts.discover()
            hosts = [
                host for host in (fleet.hosts if fleet else ()) if host.name == options["host"]
            ]
            if not hosts:
                raise CommandError(f"No fleet host named {options['host']!r}.")
            (fleethosts.cut if action == "cut" else fleethosts.rejoin)(hosts[0])
            self.stdout.write(f"{hosts[0].name}: {'cut off' if action == 'cut' else 'joined'}")

    def up(self, count: int, shared_storage: bool, cluster_name: str) -> None:
        try:
            fleet = fleethosts.up(count, shared_storage)
        except (fleethosts.FleetHostError, driver.DriverError) as exc:
            raise CommandError(str(exc)) from exc
        with transaction.atomic():
            cluster, _ = Cluster.objects.get_or_create(
                name=cluster_name, defaults={"description": "Lab fleet hosts, reached over SSH"}
            )
        for host in fleet.hosts:
            # What an earlier database left on a host still up goes first.
            removed = leftovers.remove(host.uri)
            if removed:
                self.stdout.write(
                    f"{host.name}: removed what no VM here owns, left by an earlier database: "
                    f"{', '.join(removed)}"
                )
            # By name: a fleet started again may be given other addresses. As an admin adds a
            # KVM host: reached with Corral's own key, its host key trusted (the lab made it).
            registered, created = Host.objects.update_or_create(
                cluster=cluster,
                name=host.name,
                defaults={
                    "uri": host.managed_uri,
                    "ssh_host_key": host.host_key,
                    "storage_path": host.pool_path,
                },
            )
            verb = "registered" if created else "already registered"
            status = sync_host(registered.pk).host_status
            self.stdout.write(
                f"{registered.name}: {host.address}, {verb} in {cluster.name}, {status}"
            )

"""manage.py simhosts start N [--cluster NAME] | stop | status — simulated libvirt hosts."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hosts import simhosts
from hosts.models import Cluster, Host
from hosts.sync import sync_host


class Command(BaseCommand):
    help = (
        "Start N simulated hosts (one libvirt daemon each, serving libvirt's test driver) and "
        "register them as Hosts; stop the daemons this command started; or show them."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="start N simulated hosts (idempotent)")
        start.add_argument("count", type=int)
        start.add_argument("--cluster", default="simulated", help="cluster to register them in")
        start.add_argument("--prefix", default="sim", help="host names: PREFIX-1, PREFIX-2, …")
        sub.add_parser("stop", help="stop every daemon this command started")
        sub.add_parser("status", help="list simulated hosts and whether they run")

    def handle(self, *args, action: str, **options):
        base = settings.CORRAL_SIMHOSTS_DIR
        if action == "start":
            self.start(base, options["count"], options["cluster"], options["prefix"])
        elif action == "stop":
            for host in simhosts.discover(base):
                stopped = simhosts.stop(host)
                self.stdout.write(f"{host.name}: {'stopped' if stopped else 'was not running'}")
        else:
            for host in simhosts.discover(base):
                pid = host.pid()
                state = f"running (pid {pid})" if pid else "stopped"
                self.stdout.write(f"{host.name}: {state}  {host.uri}")

    def start(self, base, count: int, cluster_name: str, prefix: str) -> None:
        if count < 1:
            raise CommandError("Give a number of hosts of at least 1.")
        with transaction.atomic():
            cluster, _ = Cluster.objects.get_or_create(
                name=cluster_name, defaults={"description": "Simulated libvirt hosts"}
            )
        for index in range(1, count + 1):
            name = f"{prefix}-{index}"
            host = simhosts.SimHost(
                name=f"{cluster_name}-{name}", directory=base / f"{cluster_name}-{name}"
            )
            try:
                pid = simhosts.start(host)
            except simhosts.SimHostError as exc:
                raise CommandError(str(exc)) from exc
            registered, created = Host.objects.update_or_create(
                uri=host.uri, defaults={"name": name, "cluster": cluster}
            )
            verb = "registered" if created else "already registered"
            status = sync_host(registered.pk).host_status
            self.stdout.write(
                f"{registered.name}: libvirtd pid {pid}, {verb} in {cluster.name}, {status}"
            )

"""manage.py simhosts start N [--qemu] [--cluster NAME] | stop | status — local libvirt hosts.

Simulated hosts serve libvirt's test driver; with ``--qemu`` they are real QEMU hosts
(hosts/qemuhosts.py) that run real guests.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hosts import driver, qemuhosts, simhosts
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
        start.add_argument(
            "--qemu", action="store_true", help="real QEMU hosts (cluster qemu, names qemu-N)"
        )
        start.add_argument("--cluster", help="cluster to register them in (default: simulated)")
        start.add_argument("--prefix", help="host names: PREFIX-1, PREFIX-2, … (default: sim)")
        sub.add_parser("stop", help="stop every daemon this command started")
        sub.add_parser("status", help="list simulated hosts and whether they run")

    def handle(self, *args, action: str, **options):
        base = settings.CORRAL_SIMHOSTS_DIR
        if action == "start":
            cluster = options["cluster"] or ("qemu" if options["qemu"] else "simulated")
            prefix = options["prefix"] or ("qemu" if options["qemu"] else "sim")
            self.start(base, options["count"], cluster, prefix, qemu=options["qemu"])
        elif action == "stop":
            for host in simhosts.discover(base) + qemuhosts.discover(base):
                stop = qemuhosts.stop if isinstance(host, qemuhosts.QemuHost) else simhosts.stop
                stopped = stop(host)
                self.stdout.write(f"{host.name}: {'stopped' if stopped else 'was not running'}")
        else:
            for host in simhosts.discover(base) + qemuhosts.discover(base):
                pid = host.pid()
                state = f"running (pid {pid})" if pid else "stopped"
                self.stdout.write(f"{host.name}: {state}  {host.uri}")

    def start(self, base, count: int, cluster_name: str, prefix: str, qemu: bool) -> None:
        if count < 1:
            raise CommandError("Give a number of hosts of at least 1.")
        description = "Real QEMU hosts" if qemu else "Simulated libvirt hosts"
        with transaction.atomic():
            cluster, _ = Cluster.objects.get_or_create(
                name=cluster_name, defaults={"description": description}
            )
        for index in range(1, count + 1):
            name = f"{prefix}-{index}"
            folder = f"{cluster_name}-{name}"
            try:
                if qemu:
                    # Their folder must be short (see hosts/qemuhosts.py): a link records it.
                    directory = qemuhosts.named_directory(base / folder)
                    host = qemuhosts.QemuHost(name=folder, directory=directory)
                    qemuhosts.link(base, folder, host)
                    pid = qemuhosts.start(host)
                else:
                    host = simhosts.SimHost(name=folder, directory=base / folder)
                    pid = simhosts.start(host)
            except (simhosts.SimHostError, driver.DriverError) as exc:
                raise CommandError(str(exc)) from exc
            registered, created = Host.objects.update_or_create(
                uri=host.uri, defaults={"name": name, "cluster": cluster}
            )
            verb = "registered" if created else "already registered"
            status = sync_host(registered.pk).host_status
            self.stdout.write(
                f"{registered.name}: libvirtd pid {pid}, {verb} in {cluster.name}, {status}"
            )

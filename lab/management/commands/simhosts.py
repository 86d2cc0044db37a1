"""manage.py simhosts start N [--qemu | --light --vms M [--latency-ms L]] [--cluster NAME]
| light-change HOST VM STATE | stop | status — local libvirt hosts.

Simulated hosts serve libvirt's test driver; with ``--qemu`` they are real QEMU hosts
(lab/qemuhosts.py) that run real guests; with ``--light`` one process serves them all
without libvirt (lab/lightsim/server.py), each with M running domains, for scale tests.
"""

import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hosts import driver
from hosts.models import Cluster, Host
from hosts.sync import sync_host
from lab import leftovers, qemuhosts, simhosts
from lab.lightsim import driver as lightsim


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
        start.add_argument(
            "--light", action="store_true", help="light hosts served by one process (no libvirt)"
        )
        start.add_argument("--vms", type=int, default=0, help="running domains per light host")
        start.add_argument(
            "--latency-ms", type=float, default=0.0, help="how long a light host takes to answer"
        )
        change = sub.add_parser(
            "light-change", help="change a light host's domain behind Corral's back"
        )
        change.add_argument("host", help="the host's name in Corral")
        change.add_argument("vm", help="the domain's name or UUID")
        change.add_argument("state", help="running, paused, shutoff, crashed or pmsuspended")
        sub.add_parser("stop", help="stop every daemon this command started")
        sub.add_parser("status", help="list simulated hosts and whether they run")

    def stop_all(self, hosts: list) -> None:
        """Stop the hosts side by side (a QEMU host saves its running guests first), saying of
        each when it has stopped and how long it took."""

        def stop(host) -> tuple[str, bool, float]:
            started = time.monotonic()
            if isinstance(host, qemuhosts.QemuHost):
                stopped = qemuhosts.stop(host)
            else:
                stopped = simhosts.stop(host)
            return host.name, stopped, time.monotonic() - started

        if not hosts:
            return
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            for future in as_completed([pool.submit(stop, host) for host in hosts]):
                name, stopped, seconds = future.result()
                said = f"stopped ({seconds:.1f} s)" if stopped else "was not running"
                self.stdout.write(f"{name}: {said}")

    def handle(self, *args, action: str, **options):
        base = settings.CORRAL_SIMHOSTS_DIR
        if action == "start" and options["light"]:
            cluster = options["cluster"] or "simulated"
            prefix = options["prefix"] or "light"
            self.start_light(base, options, cluster, prefix)
        elif action == "start":
            cluster = options["cluster"] or ("qemu" if options["qemu"] else "simulated")
            prefix = options["prefix"] or ("qemu" if options["qemu"] else "sim")
            self.start(base, options["count"], cluster, prefix, qemu=options["qemu"])
        elif action == "light-change":
            self.light_change(options["host"], options["vm"], options["state"])
        elif action == "stop":
            light = simhosts.light_server(base)
            if light.pid() is not None:
                simhosts.stop_light(light)
                self.stdout.write("light hosts: stopped")
            self.stop_all(simhosts.discover(base) + qemuhosts.discover(base))
        else:
            light = simhosts.light_server(base)
            if light.pid() is not None:
                self.stdout.write(f"light hosts: running (pid {light.pid()})  {light.socket}")
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
                    # Their folder must be short (see lab/qemuhosts.py): a link records it.
                    directory = qemuhosts.named_directory(base / folder)
                    host = qemuhosts.QemuHost(name=folder, directory=directory)
                    qemuhosts.link(base, folder, host)
                    pid = qemuhosts.start(host)
                else:
                    host = simhosts.SimHost(name=folder, directory=base / folder)
                    pid = simhosts.start(host)
                # What an earlier database left on the lab's own host goes first.
                removed = leftovers.remove(host.uri)
            except (simhosts.SimHostError, driver.DriverError) as exc:
                raise CommandError(str(exc)) from exc
            if removed:
                self.stdout.write(
                    f"{name}: removed what no VM here owns, left by an earlier database: "
                    f"{', '.join(removed)}"
                )
            defaults = {"name": name, "cluster": cluster}
            if qemu:
                # No bridge here: guests' SSH is published on this machine's loopback.
                low, high = qemuhosts.guest_ssh_ports(host)
                defaults.update(guest_ssh_port_min=low, guest_ssh_port_max=high)
            registered, created = Host.objects.update_or_create(uri=host.uri, defaults=defaults)
            verb = "registered" if created else "already registered"
            status = sync_host(registered.pk).host_status
            self.stdout.write(
                f"{registered.name}: libvirtd pid {pid}, {verb} in {cluster.name}, {status}"
            )

    def start_light(self, base, options, cluster_name: str, prefix: str) -> None:
        count = options["count"]
        if count < 1 or options["vms"] < 0 or options["latency_ms"] < 0:
            raise CommandError("Give at least 1 host, and no negative VM count or latency.")
        server = simhosts.light_server(base)
        try:
            pid = simhosts.start_light(server)
        except simhosts.SimHostError as exc:
            raise CommandError(str(exc)) from exc
        with transaction.atomic():
            cluster, _ = Cluster.objects.get_or_create(
                name=cluster_name, defaults={"description": "Light simulated hosts"}
            )
        known = set(Host.objects.values_list("uri", flat=True))
        new = []
        for index in range(1, count + 1):
            name = f"{prefix}-{index}"
            uri = server.uri(f"{cluster_name}-{name}")
            lightsim.control(uri, "add", vms=options["vms"], latency_ms=options["latency_ms"])
            if uri not in known:
                new.append(Host(name=name, cluster=cluster, uri=uri))
        Host.objects.bulk_create(new, batch_size=500)
        self.stdout.write(
            f"{count} light hosts ({len(new)} registered now) with {options['vms']} VMs each in "
            f"{cluster.name}, served by pid {pid}; a task cluster syncs them."
        )

    def light_change(self, name: str, vm: str, state: str) -> None:
        hosts = [h for h in Host.objects.filter(name=name) if lightsim.handles(h.uri)]
        if len(hosts) != 1:
            raise CommandError(f"No single light host named {name!r}.")
        try:
            lightsim.control(hosts[0].uri, "set", uuid=vm, state=state)
        except driver.DriverError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"{name}: {vm} is {state} now")

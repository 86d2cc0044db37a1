"""Seed a demo: what each app registered in ``project.demo`` (template, VMs, a pool...)."""

from django.core.management.base import BaseCommand

from project import demo


class Command(BaseCommand):
    help = "Create the demo objects every app contributes (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--vms", type=int, default=4)
        parser.add_argument("--lab", default="", help="the cluster of real QEMU hosts, if any")

    def handle(self, *args, cluster: str, vms: int, lab: str, **options):
        for line in demo.seed(cluster=cluster, vms=vms, lab=lab):
            self.stdout.write(line)

"""manage.py tinyguest build [--dest DIR] — build (or find) the tiny guest and print its files."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from lab import tinyguest


class Command(BaseCommand):
    help = (
        "Build the tiny guest real QEMU hosts boot (Debian's cloud kernel, busybox, the QEMU "
        "guest agent) unless already built for the packages apt offers, and print its files."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        build = sub.add_parser("build", help="build it if missing; print the paths")
        build.add_argument(
            "--dest", type=Path, help="cache folder (default: the CORRAL_TINYGUEST_DIR setting)"
        )

    def handle(self, *args, action: str, dest: Path | None = None, **options):
        try:
            guest = tinyguest.build(dest)
        except tinyguest.TinyGuestError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"kernel {guest.kernel}")
        self.stdout.write(f"initrd {guest.initrd}")
        self.stdout.write(f"disk {guest.disk}")

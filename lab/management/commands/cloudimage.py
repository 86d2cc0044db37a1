"""manage.py cloudimage build [--dest DIR] — build (or find) the Debian cloud image and print
its files."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from lab import cloudimage, debpackages


class Command(BaseCommand):
    help = (
        "Build a Debian 12 cloud image (cloud-init, OpenSSH, the QEMU guest agent, Debian's "
        "cloud kernel) unless already built for the packages apt offers, and print its files."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        build = sub.add_parser("build", help="build it if missing (as root); print the paths")
        build.add_argument(
            "--dest", type=Path, help="cache folder (default: the CORRAL_CLOUDIMAGE_DIR setting)"
        )

    def handle(self, *args, action: str, dest: Path | None = None, **options):
        try:
            image = cloudimage.build(dest)
        except debpackages.BuildError as exc:
            raise CommandError(str(exc)) from exc
        manifest = image.manifest
        self.stdout.write(f"kernel {image.kernel}")
        self.stdout.write(f"initrd {image.initrd}")
        self.stdout.write(f"disk {image.disk}")
        self.stdout.write(f"cmdline {manifest['kernel_cmdline']}")
        self.stdout.write(f"login-user {manifest['login_user']}")
        self.stdout.write(
            f"built in {manifest['build_seconds']} s; disk {manifest['disk_bytes']} bytes "
            f"({manifest['disk_virtual_bytes']} virtual)"
        )

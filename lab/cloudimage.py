"""A Debian 12 cloud image built from Debian packages: the kind of disk a real user brings.

Unlike the tiny guest (``lab/tinyguest.py``) it is a whole system: systemd, cloud-init,
OpenSSH, sudo and the QEMU guest agent on Debian's cloud kernel. cloud-init reads a NoCloud
seed (a CD-ROM labelled ``cidata``), sets the hostname, creates the user ``debian`` with the
seed's SSH keys and runs the seed's commands; DHCP on the virtio NIC comes from cloud-init's
fallback network config, written for ifupdown (its first renderer on Debian 12).

How it is built (``build()``, or ``manage.py cloudimage build``), as root:

1. ``apt-cache`` names the candidate versions of ``PACKAGES`` (and of the versioned kernel
   package); they, ``LAYOUT_VERSION`` and the build's other inputs make the cache key.
2. ``mmdebstrap --mode=root`` installs exactly those versions into a directory, without
   documentation, man pages or translations; the kernel's package makes the initrd there.
3. The tree is made generic: cloud-init looks only for NoCloud (then None), the SSH host keys
   and machine id are removed (each instance makes its own at first boot), the host's
   ``resolv.conf`` and hostname are dropped.
4. ``mke2fs -d`` writes the tree into an ext4 filesystem image (nothing is mounted) and
   ``qemu-img convert -c`` compresses it into ``disk.qcow2``; the filesystem fills the whole
   disk (no partition table) and cloud-init grows it when the disk is made larger.

Results go to ``CORRAL_CLOUDIMAGE_DIR/<kernel version>-<key>/``: ``vmlinuz``, ``initrd.img``,
``disk.qcow2`` and ``manifest.json`` (versions, build time, sizes). Boot the kernel directly
with ``KERNEL_CMDLINE``. A build happens in a temporary folder beside the results, under a file
lock, and is renamed into place whole: concurrent builds wait for one another and never see a
half-built image.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from lab import debpackages

logger = logging.getLogger(__name__)

KERNEL_PACKAGE = "linux-image-cloud-amd64"
# What the image holds besides Debian's required packages and apt. cloud-init renders its
# network config for ifupdown (found first), which takes the address with dhclient.
PACKAGES = (
    KERNEL_PACKAGE,
    "systemd-sysv",
    "udev",
    "cloud-init",
    "openssh-server",
    "qemu-guest-agent",
    "sudo",
    "ifupdown",
    "isc-dhcp-client",
    "iproute2",
)
SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# Kept out of the image, and out of whatever is installed in it later (dpkg keeps the rule).
DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
)
LOGIN_USER = "debian"  # Debian's default user in cloud.cfg; cloud-init gives it the seed's keys
KERNEL_CMDLINE = "root=/dev/vda rw console=ttyS0"
DISK_SIZE = "2G"
MEMORY_MIB = 1024
# Written into the tree after the packages, as (path, text).
FILES = (
    (
        "etc/cloud/cloud.cfg.d/90_corral_datasource.cfg",
        "# Only a NoCloud seed (a disk labelled cidata), else nothing: never wait for a metadata\n"
        "# service on the network.\ndatasource_list: [NoCloud, None]\n",
    ),
    ("etc/fstab", "/dev/vda / ext4 rw,discard,errors=remount-ro 0 1\n"),
    ("etc/hostname", "debian\n"),
    ("etc/hosts", "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"),
    ("etc/machine-id", ""),  # empty: systemd makes one at first boot
)
# Made per instance at first boot, or copied from the build machine: not part of the image.
REMOVED = ("etc/ssh/ssh_host_*", "var/lib/dbus/machine-id", "etc/resolv.conf")
# Modules the initrd needs to find the root disk (ext4 is built into Debian's cloud kernel).
INITRD_MODULES = ("virtio_pci", "virtio_blk")
# Bumped whenever the way the image is put together changes, so cached builds are redone.
LAYOUT_VERSION = 1
BUILD_TIMEOUT_S = 1800
MIRROR_TIMEOUT_S = 15


class CloudImageError(debpackages.BuildError):
    pass


class MirrorUnreachable(CloudImageError):
    """Debian's mirror did not answer: the image cannot be built without the network."""


class CloudImage(debpackages.BootFiles):
    """A built image: boot ``kernel`` and ``initrd`` with ``KERNEL_CMDLINE`` on ``disk``."""


def default_directory() -> Path:
    from django.conf import settings

    return Path(settings.CORRAL_CLOUDIMAGE_DIR)


def build(directory: Path | None = None) -> CloudImage:
    """The image for the package versions apt offers now, built into ``directory`` if missing.

    Safe to call from several processes at once: one builds, the others wait and reuse it.
    """
    base = Path(directory) if directory is not None else default_directory()
    base.mkdir(parents=True, exist_ok=True)
    try:
        versions = debpackages.candidate_versions(
            KERNEL_PACKAGE, PACKAGES, memo=base / "candidates.json"
        )
    except debpackages.BuildError as exc:
        raise CloudImageError(str(exc)) from exc
    target = base / f"{debpackages.kernel_release(versions)}-{cache_key(versions)}"
    built = False

    def build_into(result: Path, work: Path) -> None:
        nonlocal built
        _build_into(result, work, versions, time.monotonic())
        built = True

    def before() -> None:
        _check_root()
        check_mirror()

    debpackages.build_once(target, build_into, before)
    image = CloudImage(target, versions)
    if built:
        logger.info(
            "Built the cloud image %s in %.0f s (disk %d MiB).",
            target,
            image.manifest["build_seconds"],
            image.disk.stat().st_size // 2**20,
        )
    return image


def cache_key(versions: dict[str, str]) -> str:
    """Short hash of the package versions and of everything else that shapes the image."""
    inputs = [
        LAYOUT_VERSION,
        versions,
        SUITE,
        MIRRORS,
        DPKG_OPTIONS,
        FILES,
        REMOVED,
        INITRD_MODULES,
        DISK_SIZE,
    ]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12]


def _check_root() -> None:
    if os.geteuid() != 0:
        raise CloudImageError(
            "Building the cloud image needs root: mmdebstrap --mode=root installs the packages "
            "as root, so that the files mke2fs copies into the image belong to root. Run it as "
            "root (sudo .venv/bin/python manage.py cloudimage build)."
        )


def check_mirror() -> None:
    """``MirrorUnreachable`` unless every mirror answers (any HTTP answer will do)."""
    for line in MIRRORS:
        uri, suite = line.split()[1:3]
        release = f"{uri.rstrip('/')}/dists/{suite}/InRelease"
        request = urllib.request.Request(release, method="HEAD")
        try:
            urllib.request.urlopen(request, timeout=MIRROR_TIMEOUT_S).close()
        except urllib.error.HTTPError:
            pass  # the mirror answered; a wrong path shows in mmdebstrap's error
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MirrorUnreachable(
                f"Debian's mirror is unreachable ({release}: {reason}); "
                "building the cloud image needs it."
            ) from exc


def _build_into(result: Path, work: Path, versions: dict[str, str], started: float) -> None:
    root = work / "root"
    kernel = versions["kernel"]
    wanted = [f"{kernel}={versions[kernel]}"]
    wanted += [f"{package}={versions[package]}" for package in PACKAGES]
    debpackages.run(
        [
            "mmdebstrap",
            "--mode=root",
            "--variant=apt",
            "--aptopt=APT::Install-Recommends false",
            *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
            f"--include={','.join(wanted)}",
            SUITE,
            str(root),
            *MIRRORS,
        ],
        timeout=BUILD_TIMEOUT_S,
    )
    packages_done = time.monotonic()
    _make_generic(root)
    release = kernel.removeprefix("linux-image-")
    _check_tree(root, release)
    shutil.copyfile(root / "boot" / f"vmlinuz-{release}", result / "vmlinuz")
    shutil.copyfile(root / "boot" / f"initrd.img-{release}", result / "initrd.img")
    installed = dict(
        line.split("\t")
        for line in debpackages.run(
            ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Package}\t${Version}\n"]
        ).splitlines()
    )
    tree_bytes = int(debpackages.run(["du", "-sb", str(root)]).split()[0])

    filesystem = work / "root.ext4"
    debpackages.run(
        ["mke2fs", "-q", "-F", "-t", "ext4", "-L", "root", "-d", str(root), str(filesystem)]
        + [DISK_SIZE],
        timeout=BUILD_TIMEOUT_S,
    )
    shutil.rmtree(root)
    debpackages.run(
        ["qemu-img", "convert", "-c", "-O", "qcow2", str(filesystem), str(result / "disk.qcow2")],
        timeout=BUILD_TIMEOUT_S,
    )
    virtual_size = json.loads(
        debpackages.run(["qemu-img", "info", "--output=json", str(result / "disk.qcow2")])
    )["virtual-size"]
    manifest = {
        "versions": versions,
        "installed": installed,
        "kernel_cmdline": KERNEL_CMDLINE,
        "login_user": LOGIN_USER,
        "memory_mib": MEMORY_MIB,
        "disk_virtual_bytes": virtual_size,
        "disk_bytes": (result / "disk.qcow2").stat().st_size,
        "tree_bytes": tree_bytes,
        "packages_seconds": round(packages_done - started, 1),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    (result / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _make_generic(root: Path) -> None:
    for pattern in REMOVED:
        for path in root.glob(pattern):
            path.unlink()
    for path, text in FILES:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def _check_tree(root: Path, release: str) -> None:
    """What a cold boot relies on and no package guarantees by itself."""
    cloud_cfg = (root / "etc/cloud/cloud.cfg").read_text()
    if not re.search(rf"default_user:\s*\n\s*name:\s*{LOGIN_USER}\s*\n", cloud_cfg):
        raise CloudImageError(
            f"cloud-init's cloud.cfg does not name {LOGIN_USER} the default user."
        )
    listing = debpackages.run(["chroot", str(root), "lsinitramfs", f"/boot/initrd.img-{release}"])
    found = {Path(line).name.partition(".ko")[0] for line in listing.split()}
    missing = [module for module in INITRD_MODULES if module not in found]
    if missing:
        raise CloudImageError(f"The initrd lacks the modules {', '.join(missing)}.")

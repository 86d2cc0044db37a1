"""The tiny guest: a real Linux VM that boots in seconds under QEMU, built from Debian packages.

It is what Corral's real-QEMU tests and demos run: Debian's cloud kernel, an initramfs holding
busybox, the QEMU guest agent, an SSH server (dropbear) and a few kernel modules, and a blank
qcow2 disk. Nothing else: no distribution image is downloaded and nothing is installed on the
machine. A person logs in as ``LOGIN_USER`` (``corral``, uid 1000, home ``/home/corral``): by
SSH with a key, or on the guest's screen or serial console, where a shell is already logged in.

How it is built (``build()``, or ``manage.py tinyguest build``):

1. ``apt-cache`` names the candidate versions of ``linux-image-cloud-amd64`` (and the versioned
   kernel package it depends on), ``busybox-static``, ``qemu-guest-agent``, ``dropbear-bin``
   and the two libraries dropbear needs that a QEMU host lacks (``libtomcrypt1``,
   ``libtommath1``). Those versions and the guest's own files (``lab/tinyguest_files/``) make
   the cache key: a second build with the same key does nothing.
2. ``apt-get download`` fetches the packages into a temporary folder and ``dpkg-deb -x``
   extracts them.
3. The initramfs is written in Python (``lab/initramfs.py``): ``/dev/console``, busybox,
   ``/init`` and its scripts, the accounts (``/etc/passwd``, ``group``, ``shadow``: root and
   ``corral``, whose password ``*`` matches no password, so only keys log in), the kernel
   modules for virtio devices, the ACPI power button and a cloud-init CD-ROM (decompressed when
   the kernel ships them compressed; those built into the kernel are skipped), and ``qemu-ga``
   and ``dropbear`` with the shared libraries ``ldd`` lists, the packages' own or else copied
   from this machine (they are present wherever QEMU is: ``qemu-system-x86`` depends on each).
4. ``qemu-img create`` makes the blank disk ``disk.qcow2``.

Results go to ``CORRAL_TINYGUEST_DIR/<kernel version>-<key>/``: ``vmlinuz``, ``initrd.img``,
``disk.qcow2`` and ``manifest.json``. A build happens in a temporary folder beside it, under a
file lock, and is renamed into place whole, so concurrent builds neither collide nor leave a
half-built guest behind.

What the guest does at boot (``lab/tinyguest_files/init``), each step announced on the
serial console as ``corral-guest: ...``: load the modules; take an address by DHCP (``ip
10.0.2.15`` on a user-mode NIC); format ``/dev/vda`` when it holds no filesystem, then count
boots on it (``boot N``, so a test can tell a reverted disk); read a NoCloud seed labelled
``cidata`` if one is attached (``hostname NAME``; ``ssh-keys N``: the ``ssh_authorized_keys``
of its user-data, written to ``/home/corral/.ssh/authorized_keys``); start ``acpid`` (the power
button powers off) and the guest agent (``agent /dev/vportNp1``; its
``guest-ssh-*-authorized-keys`` commands change ``corral``'s keys in the running guest); start
dropbear on port 22 (``sshd`` once it listens; host keys are made on first use); print
``booted``; then keep a shell logged in as ``corral`` on the screen (``tty1``: VGA text and
the PS/2 keyboard, what VNC shows and types into) and on the console, each started again when
it exits. It needs 128 MiB of RAM.

Kernel command line: ``console=ttyS0`` (what the serial log and the tests read). The screen's
shell needs nothing more; ``console=tty0 console=ttyS0`` also shows the kernel's messages on
the screen, and keeps ``/dev/console`` on the serial port as long as ``ttyS0`` comes last.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import lzma
import os
import re
import shutil
from pathlib import Path

from lab import debpackages, initramfs

logger = logging.getLogger("corral.lab")

KERNEL_PACKAGE = "linux-image-cloud-amd64"
BUSYBOX_PACKAGE = "busybox-static"
AGENT_PACKAGE = "qemu-guest-agent"
AGENT = "usr/sbin/qemu-ga"
# The SSH server, and the two libraries it needs that a QEMU host does not have.
SSH_PACKAGES = ("dropbear-bin", "libtomcrypt1", "libtommath1")
SSH_SERVER = "usr/sbin/dropbear"
# Where the packages keep their libraries, for ldd to find them before this machine's.
PACKAGE_LIBRARIES = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
# The account a person logs in as, by SSH with their key or on the screen (no password).
LOGIN_USER = "corral"
PACKAGES = (KERNEL_PACKAGE, BUSYBOX_PACKAGE, AGENT_PACKAGE, *SSH_PACKAGES)

# Loaded in this order (each after those it needs); the first group drives the virtio devices,
# the ACPI power button and its input events, the second a CD-ROM on the IDE bus with ISO 9660.
MODULES = (
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
    "virtio_blk",
    "virtio_console",
    "virtio_balloon",
    "button",
    "evdev",
    "scsi_common",
    "scsi_mod",
    "libata",
    "ata_piix",
    "cdrom",
    "sr_mod",
    "isofs",
)
MEMORY_MIB = 128
DISK_SIZE = "64M"
GUEST_FILES = Path(__file__).resolve().parent / "tinyguest_files"
# The guest's files: (name in GUEST_FILES, path in the initramfs).
SCRIPTS = (
    ("init", "init"),
    ("udhcpc.script", "etc/udhcpc.script"),
    ("power-button", "etc/acpi/PWRF/00000080"),
    ("shutdown", "sbin/shutdown"),
    ("login-shell", "bin/login-shell"),
)
# Its accounts and settings: (name in GUEST_FILES, path in the initramfs, permissions).
CONFIG_FILES = (
    ("passwd", "etc/passwd", 0o644),
    ("group", "etc/group", 0o644),
    ("shadow", "etc/shadow", 0o600),
    ("shells", "etc/shells", 0o644),
    ("nsswitch.conf", "etc/nsswitch.conf", 0o644),
    ("profile", "etc/profile", 0o644),
)
# Bumped whenever the way the guest is put together changes, so cached builds are redone.
LAYOUT_VERSION = 2


# Kept under its own name: callers catch it. Every build step raises it.
TinyGuestError = debpackages.BuildError


class TinyGuest(debpackages.BootFiles):
    """A built guest: boot it with ``kernel`` and ``initrd``, its disk an overlay of ``disk``."""


def default_directory() -> Path:
    from django.conf import settings

    return Path(settings.CORRAL_TINYGUEST_DIR)


def build(directory: Path | None = None) -> TinyGuest:
    """The tiny guest for the packages apt offers now, built into ``directory`` if missing.

    Safe to call from several processes at once: one builds, the others wait and reuse it.
    """
    base = Path(directory) if directory is not None else default_directory()
    base.mkdir(parents=True, exist_ok=True)
    versions = debpackages.candidate_versions(
        KERNEL_PACKAGE, PACKAGES, memo=base / "candidates.json"
    )
    target = base / f"{debpackages.kernel_release(versions)}-{cache_key(versions)}"
    debpackages.build_once(
        target,
        lambda result, work: _build_into(result, work, versions),
        before=lambda: logger.info("Building the tiny guest in %s (about a minute, once)", target),
    )
    return TinyGuest(target, versions)


def cache_key(versions: dict[str, str]) -> str:
    """Short hash of the package versions and of everything that shapes the guest."""
    digest = hashlib.sha256()
    digest.update(json.dumps([LAYOUT_VERSION, versions, MODULES, DISK_SIZE]).encode())
    for name, *_ in (*SCRIPTS, *CONFIG_FILES):
        digest.update((GUEST_FILES / name).read_bytes())
    return digest.hexdigest()[:12]


def _build_into(result: Path, work: Path, versions: dict[str, str]) -> None:
    debs, root = work / "debs", work / "root"
    debs.mkdir()
    root.mkdir()
    kernel = versions["kernel"]
    wanted = [f"{kernel}={versions[kernel]}"] + [
        f"{package}={versions[package]}"
        for package in (BUSYBOX_PACKAGE, AGENT_PACKAGE, *SSH_PACKAGES)
    ]
    logger.info("Tiny guest: downloading %d packages (%s)", len(wanted), ", ".join(wanted))
    debpackages.run(["apt-get", "download", *wanted], cwd=debs)
    logger.info("Tiny guest: unpacking them")
    for deb in sorted(debs.glob("*.deb")):
        debpackages.run(["dpkg-deb", "-x", str(deb), str(root)])

    release = debpackages.kernel_release(versions)
    shutil.copyfile(root / "boot" / f"vmlinuz-{release}", result / "vmlinuz")
    modules = _modules(root / "lib" / "modules" / release)
    libraries = _libraries(root, AGENT, SSH_SERVER)
    entries = _initramfs_entries(root, modules, libraries)
    logger.info("Tiny guest: writing its initramfs and its blank disk")
    (result / "initrd.img").write_bytes(initramfs.gzipped_cpio(entries))
    debpackages.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", str(result / "disk.qcow2"), DISK_SIZE]
    )
    manifest = {
        "versions": versions,
        "modules": list(modules),
        "libraries": [f"/{path}" for path, _ in libraries],
        "memory_mib": MEMORY_MIB,
    }
    (result / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    logger.info("Tiny guest: built (kernel %s)", release)


def _modules(tree: Path) -> dict[str, bytes]:
    """The wanted modules that the kernel has as files, decompressed, in loading order."""
    files = {}
    for path in tree.rglob("*.ko*"):
        name, _, compression = path.name.partition(".ko")
        files[name.replace("-", "_")] = (path, compression)
    builtin_file = tree / "modules.builtin"
    builtin = {
        Path(line).name.partition(".ko")[0].replace("-", "_")
        for line in (builtin_file.read_text().split() if builtin_file.exists() else [])
    }
    modules = {}
    for name in MODULES:
        if name not in files:
            if name in builtin:
                continue
            raise TinyGuestError(f"The kernel in {tree} has no module {name}.")
        path, compression = files[name]
        data = path.read_bytes()
        if compression == ".xz":
            data = lzma.decompress(data)
        elif compression == ".gz":
            data = gzip.decompress(data)
        elif compression:
            raise TinyGuestError(f"Cannot decompress kernel module {path.name}.")
        modules[name] = data
    return modules


_LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)$")


def _libraries(root: Path, *programs: str) -> list[tuple[str, Path]]:
    """``(path in the guest, file to copy)`` for each library ``ldd`` lists for ``programs``
    (paths under ``root``): the extracted packages' own, else this machine's."""
    search = ":".join(str(root / folder) for folder in PACKAGE_LIBRARIES)
    libraries: dict[str, Path] = {}
    for program in programs:
        output = debpackages.run(
            ["ldd", str(root / program)], env={**os.environ, "LD_LIBRARY_PATH": search}
        )
        missing = [line.split()[0] for line in output.splitlines() if "not found" in line]
        if missing:
            raise TinyGuestError(
                f"Libraries of {Path(program).name} missing on this machine: "
                f"{', '.join(missing)}; install qemu-system-x86 (it depends on them)."
            )
        for line in output.splitlines():
            match = _LDD_LINE.match(line)
            if match:
                path = Path(match.group(1))
                in_guest = path.relative_to(root) if path.is_relative_to(root) else path
                libraries.setdefault(str(in_guest).lstrip("/"), path.resolve())
    return list(libraries.items())


def _guest_file(name: str) -> bytes:
    return (GUEST_FILES / name).read_bytes()


def _initramfs_entries(
    root: Path, modules: dict[str, bytes], libraries: list[tuple[str, Path]]
) -> list[initramfs.Entry]:
    entries = [
        initramfs.character_device("dev/console", 5, 1),
        initramfs.regular_file("bin/busybox", (root / "bin" / "busybox").read_bytes(), 0o755),
        initramfs.symlink("bin/sh", "busybox"),
        initramfs.regular_file(AGENT, (root / AGENT).read_bytes(), 0o755),
        initramfs.regular_file(SSH_SERVER, (root / SSH_SERVER).read_bytes(), 0o755),
        initramfs.regular_file("etc/modules", "".join(f"{m}\n" for m in modules).encode()),
        initramfs.regular_file("etc/hostname", b"corral-guest\n"),
    ]
    for name, path in SCRIPTS:
        entries.append(initramfs.regular_file(path, _guest_file(name), 0o755))
    for name, path, permissions in CONFIG_FILES:
        entries.append(initramfs.regular_file(path, _guest_file(name), permissions))
    for name, data in modules.items():
        entries.append(initramfs.regular_file(f"lib/modules/{name}.ko", data))
    for path, source in libraries:
        entries.append(initramfs.regular_file(path, source.read_bytes(), 0o755))
    for folder in ("proc", "sys", "run", "mnt/state", "mnt/seed", "etc/dropbear", "home"):
        entries.append(initramfs.directory(folder))
    entries.append(initramfs.directory("root", 0o700))
    entries.append(initramfs.directory("tmp", 0o1777))
    entries.append(initramfs.symlink("var/run", "../run"))
    return entries

"""What the lab's guest builds share: asking apt which package versions it would install,
running build tools with a time limit, building once (under a file lock, in a temporary folder
renamed into place whole) and the built guest's boot files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT_S = 600
APT_LISTS = Path("/var/lib/apt/lists")
APT_SOURCES = Path("/etc/apt")


class BuildError(Exception):
    """A guest could not be built; the message says which step failed and how."""


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (made if missing); others wait for it."""
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run(command: list[str], timeout: float = COMMAND_TIMEOUT_S, **kwargs) -> str:
    """``command``'s standard output; ``BuildError`` with its error output if it fails."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except FileNotFoundError as exc:
        raise BuildError(f"{command[0]} is not installed: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{' '.join(command)} took over {timeout:g} s.") from exc
    if done.returncode != 0:
        raise BuildError(
            f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return done.stdout


def package_records(packages: list[str]) -> dict[str, dict[str, str]]:
    """Fields of the version of each package that apt would install (its candidate)."""
    text = run(["apt-cache", "show", "--no-all-versions", *packages])
    records: dict[str, dict[str, str]] = {}
    for paragraph in text.split("\n\n"):
        record: dict[str, str] = {}
        for line in paragraph.splitlines():
            key, sep, value = line.partition(":")
            if sep and line[:1] not in ("", " ", "\t"):
                record[key] = value.strip()
        if record.get("Package") in packages and "Version" in record:
            records.setdefault(record["Package"], record)
    missing = [package for package in packages if package not in records]
    if missing:
        raise BuildError(
            f"apt knows no package {', '.join(missing)}; run apt-get update "
            "(and check the sources list)."
        )
    return records


def apt_lists_stamp() -> str:
    """Changes whenever apt's package lists or sources do (apt-get update, a new source)."""
    stamp = []
    for folder in (APT_LISTS, APT_SOURCES):
        for path in sorted(folder.rglob("*")) if folder.exists() else []:
            info = path.stat()
            stamp.append((str(path), info.st_size, info.st_mtime_ns))
    return hashlib.sha256(json.dumps(stamp).encode()).hexdigest()


def candidate_versions(
    kernel_package: str, packages: tuple[str, ...], memo: Path | None = None
) -> dict[str, str]:
    """``{"kernel": <versioned kernel package>, <it>: version, <package>: version, ...}`` for
    the versioned kernel package ``kernel_package`` depends on and every one of ``packages``.

    With ``memo``, the answer is kept in that file until apt's lists or ``packages`` change:
    asking apt costs seconds on machines without its binary cache, and a built guest should
    cost nothing.
    """
    stamp = hashlib.sha256(json.dumps([apt_lists_stamp(), packages]).encode()).hexdigest()
    if memo is not None:
        with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
            remembered = json.loads(memo.read_text())
            if remembered["stamp"] == stamp:
                return remembered["versions"]
    records = package_records(list(packages))
    depends = records[kernel_package].get("Depends", "")
    match = re.search(r"(linux-image-[^\s,(|]+)\s*\(=\s*([^)\s]+)\)", depends)
    if not match:
        raise BuildError(f"{kernel_package} depends on no versioned kernel package.")
    kernel, kernel_version = match.groups()
    versions = {"kernel": kernel, kernel: kernel_version}
    versions.update({package: records[package]["Version"] for package in packages})
    if memo is not None:
        written = memo.with_name(f".{memo.name}.{os.getpid()}")
        written.write_text(json.dumps({"stamp": stamp, "versions": versions}))
        written.replace(memo)  # atomic: a concurrent reader sees the old or the new memo
    return versions


def kernel_release(versions: dict[str, str]) -> str:
    """The kernel's release (``6.1.0-…-cloud-amd64``) of ``candidate_versions``' answer."""
    return versions["kernel"].removeprefix("linux-image-")


def build_once(
    target: Path,
    build_into: Callable[[Path, Path], None],
    before: Callable[[], None] | None = None,
) -> Path:
    """``target`` (a folder holding ``manifest.json``), built unless it is there already.

    ``build_into(result, work)`` writes the results into ``result`` (the manifest last) and may
    use ``work`` for anything else; ``before()`` runs first, only when a build is needed. Safe
    from several processes at once: one builds under a file lock beside ``target``, the others
    wait and reuse it, and the build happens in a temporary folder renamed into place whole, so
    a killed build leaves nothing anyone mistakes for a result.
    """
    base = target.parent
    base.mkdir(parents=True, exist_ok=True)
    if (target / "manifest.json").exists():
        return target
    with exclusive(base / ".lock"):
        if (target / "manifest.json").exists():
            return target
        if before is not None:
            before()
        for stale in base.glob(".build-*"):  # left by a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=base) as work:
            result = Path(work) / "result"
            result.mkdir()
            build_into(result, Path(work))
            result.rename(target)
    return target


@dataclass(frozen=True)
class BootFiles:
    """A built guest: boot ``kernel`` and ``initrd``, its disk an overlay of ``disk``."""

    directory: Path
    versions: dict[str, str]

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    @property
    def disk(self) -> Path:
        return self.directory / "disk.qcow2"

    @property
    def manifest(self) -> dict:
        return json.loads((self.directory / "manifest.json").read_text())

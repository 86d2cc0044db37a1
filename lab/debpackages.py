"""What the lab's guest builds share: asking apt which package versions it would install,
running build tools with a time limit, and the file lock under which one build runs at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import subprocess
from collections.abc import Iterator
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

"""Initramfs archives: the gzip'd "newc" cpio that Linux unpacks into its first root filesystem.

Written here rather than by the ``cpio`` tool so that building a guest needs no extra program.
The archive is reproducible: every timestamp is zero, entries keep the order given (parents
first, added where missing).
"""

from __future__ import annotations

import gzip
import io
import stat
from collections.abc import Iterable
from dataclasses import dataclass

MAGIC = b"070701"
TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class Entry:
    """One member: ``path`` without a leading slash, ``mode`` with its file type bits."""

    path: str
    mode: int
    data: bytes = b""
    device: tuple[int, int] = (0, 0)


def directory(path: str, permissions: int = 0o755) -> Entry:
    return Entry(path, stat.S_IFDIR | permissions)


def regular_file(path: str, data: bytes, permissions: int = 0o644) -> Entry:
    return Entry(path, stat.S_IFREG | permissions, data)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, stat.S_IFLNK | 0o777, target.encode())


def character_device(path: str, major: int, minor: int, permissions: int = 0o600) -> Entry:
    return Entry(path, stat.S_IFCHR | permissions, device=(major, minor))


def with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """The entries, each preceded by any parent directory not given before it.

    The kernel does not create missing parents while unpacking, so an entry under an absent
    directory would be lost. A path given twice is refused: the second would silently win.
    """
    seen: set[str] = set()
    ordered: list[Entry] = []
    for entry in entries:
        path = entry.path.strip("/")
        if not path or path in seen:
            raise ValueError(f"initramfs entry {entry.path!r} is empty or given twice")
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent not in seen:
                seen.add(parent)
                ordered.append(directory(parent))
        seen.add(path)
        ordered.append(Entry(path, entry.mode, entry.data, entry.device))
    return ordered


def _padding(length: int) -> bytes:
    return b"\0" * (-length % 4)


def _member(inode: int, entry: Entry) -> bytes:
    name = entry.path.encode() + b"\0"
    links = 2 if stat.S_ISDIR(entry.mode) else 1
    fields = (
        inode,
        entry.mode,
        0,  # uid: root
        0,  # gid
        links,
        0,  # mtime
        len(entry.data),
        0,  # major and minor of the device holding the file: none
        0,
        entry.device[0],
        entry.device[1],
        len(name),
        0,  # checksum: unused by the "070701" format
    )
    header = MAGIC + b"".join(b"%08X" % value for value in fields)
    padded_name = name + _padding(len(header) + len(name))
    return header + padded_name + entry.data + _padding(len(entry.data))


def cpio(entries: Iterable[Entry]) -> bytes:
    """The uncompressed newc archive of ``entries`` (parents added), with its trailer."""
    out = io.BytesIO()
    for inode, entry in enumerate(with_parents(entries), start=1):
        out.write(_member(inode, entry))
    out.write(_member(0, Entry(TRAILER, 0)))
    return out.getvalue()


def gzipped_cpio(entries: Iterable[Entry]) -> bytes:
    """The archive as the kernel's ``initrd`` wants it: gzip, without a timestamp."""
    return gzip.compress(cpio(entries), compresslevel=6, mtime=0)

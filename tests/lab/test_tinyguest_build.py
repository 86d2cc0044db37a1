"""Building the tiny guest (lab/tinyguest.py): once per package versions, safe when raced."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import tinyguest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def build_command(dest: Path) -> subprocess.Popen:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="project.test_settings")
    return subprocess.Popen(
        [sys.executable, "manage.py", "tinyguest", "build", "--dest", str(dest)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_builds_at_once_make_one_guest_that_later_builds_reuse(tmp_path):
    racers = [build_command(tmp_path), build_command(tmp_path)]
    outputs = [racer.communicate(timeout=600) for racer in racers]

    assert [racer.returncode for racer in racers] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]
    built = [path for path in tmp_path.iterdir() if path.is_dir()]
    assert len(built) == 1
    guest = built[0]
    assert outputs[0][0].splitlines() == [
        f"kernel {guest / 'vmlinuz'}",
        f"initrd {guest / 'initrd.img'}",
        f"disk {guest / 'disk.qcow2'}",
    ]
    manifest = json.loads((guest / "manifest.json").read_text())
    assert manifest["modules"][:2] == ["virtio_ring", "virtio"]
    assert (guest / "initrd.img").read_bytes()[:2] == b"\x1f\x8b"  # gzip
    before = {path.name: path.stat().st_mtime_ns for path in guest.iterdir()}

    again = tinyguest.build(tmp_path)

    assert again.directory == guest
    assert {path.name: path.stat().st_mtime_ns for path in guest.iterdir()} == before

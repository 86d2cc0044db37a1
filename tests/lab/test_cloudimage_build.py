"""Building the Debian cloud image (lab/cloudimage.py): cached, and refused clearly offline."""

import pytest

from lab import cloudimage

pytestmark = pytest.mark.slow


def test_a_second_build_reuses_the_cached_image_untouched():
    try:
        first = cloudimage.build()
    except cloudimage.MirrorUnreachable as exc:
        pytest.skip(str(exc))
    before = {path.name: path.stat().st_mtime_ns for path in first.directory.iterdir()}

    again = cloudimage.build()

    assert again.directory == first.directory
    assert {path.name: path.stat().st_mtime_ns for path in again.directory.iterdir()} == before
    manifest = again.manifest
    assert manifest["kernel_cmdline"] == cloudimage.KERNEL_CMDLINE
    assert manifest["login_user"] == "debian"
    assert manifest["disk_virtual_bytes"] == 2 * 2**30
    assert {"cloud-init", "openssh-server", "qemu-guest-agent"} <= set(manifest["installed"])
    assert again.disk.read_bytes()[:4] == b"QFI\xfb"  # qcow2


def test_an_unreachable_mirror_is_told_apart_from_other_failures(monkeypatch):
    # Port 9 (discard) on the loopback address: nothing listens, the connection is refused.
    monkeypatch.setattr(cloudimage, "MIRRORS", ("deb http://127.0.0.1:9/debian bookworm main",))

    with pytest.raises(cloudimage.MirrorUnreachable, match="127.0.0.1:9"):
        cloudimage.check_mirror()

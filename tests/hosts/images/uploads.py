"""Uploading a file as an image through the API, as the real-guest tests do."""

from __future__ import annotations

from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import unique


def upload_file(client, path: Path, kind: str) -> dict:
    """The file at ``path`` as a new image of ``kind`` (POST /api/images/): the image as the
    API answered it (201)."""
    with open(path, "rb") as fh:
        body = {
            "name": unique(kind),
            "kind": kind,
            "file": SimpleUploadedFile(path.name, fh.read()),
        }
    response = client.post("/api/images/", body, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def tiny_guest_template(client, tiny_guest, **fields) -> dict:
    """A template of the tiny guest (its kernel, initrd and disk uploaded as images), its SSH
    account named and its agent on, made through the API by ``client``: the API's answer."""
    from lab import tinyguest

    body = {
        "name": unique("tiny"),
        "memory_mb": 128,
        "disk_gb": 1,
        "kernel_image": upload_file(client, tiny_guest.kernel, "kernel")["id"],
        "initrd_image": upload_file(client, tiny_guest.initrd, "initrd")["id"],
        "disk_image": upload_file(client, tiny_guest.disk, "disk")["id"],
        "kernel_cmdline": "console=ttyS0",
        "guest_agent": True,
        "login_user": tinyguest.LOGIN_USER,
        **fields,
    }
    response = client.post("/api/templates/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()

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

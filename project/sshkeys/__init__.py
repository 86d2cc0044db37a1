"""Users' SSH public keys: checked to be real OpenSSH public keys of the types Corral accepts,
fingerprinted as OpenSSH does, added and removed by their owner only. The portal's page is
``pages``, the API's ``/api/me/sshkeys/`` is ``api``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from project.error_codes import ProjectErrorCode
from project.errors import Refused
from project.models import SshKey

MAX_KEYS_PER_USER = 50
MIN_RSA_BITS = 2048
# Key type -> the curve an ECDSA key must name ("" for the others).
ALLOWED_TYPES = {
    "ssh-ed25519": "",
    "ssh-rsa": "",
    "ecdsa-sha2-nistp256": "nistp256",
    "ecdsa-sha2-nistp384": "nistp384",
    "ecdsa-sha2-nistp521": "nistp521",
    "sk-ssh-ed25519@openssh.com": "",
    "sk-ecdsa-sha2-nistp256@openssh.com": "nistp256",
}
# Uncompressed EC point sizes (0x04 || X || Y).
EC_POINT_BYTES = {"nistp256": 65, "nistp384": 97, "nistp521": 133}


@dataclass(frozen=True)
class PublicKey:
    key_type: str
    blob: bytes
    comment: str

    @property
    def fingerprint(self) -> str:
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    @property
    def line(self) -> str:
        """The key as one authorized_keys line: type, base64, and its comment if any."""
        text = f"{self.key_type} {base64.b64encode(self.blob).decode()}"
        return f"{text} {self.comment}" if self.comment else text


def _strings(blob: bytes) -> list[bytes]:
    """The SSH wire format's length-prefixed strings that make up ``blob``."""
    parts, offset = [], 0
    while offset < len(blob):
        if offset + 4 > len(blob):
            raise ValueError("truncated length")
        (size,) = struct.unpack(">I", blob[offset : offset + 4])
        offset += 4
        if offset + size > len(blob):
            raise ValueError("truncated string")
        parts.append(blob[offset : offset + size])
        offset += size
    return parts


def parse_public_key(text: str) -> PublicKey:
    """The key in ``text`` (one line: ``type base64 [comment]``); Refused (field
    ``public_key``) when it is not a well-formed OpenSSH public key of an accepted type."""
    line = (text or "").strip()
    if "\n" in line or "\r" in line or "\0" in line:
        raise Refused(ProjectErrorCode.INVALID_KEY, "Give one key on one line.", field="public_key")
    fields = line.split(None, 2)
    if len(fields) < 2:
        raise Refused(
            ProjectErrorCode.INVALID_KEY,
            "This is not an OpenSSH public key: expected 'TYPE BASE64 [COMMENT]', as in "
            "~/.ssh/id_ed25519.pub.",
            field="public_key",
        )
    key_type, encoded = fields[0], fields[1]
    comment = fields[2].strip() if len(fields) == 3 else ""
    if key_type not in ALLOWED_TYPES:
        raise Refused(
            ProjectErrorCode.KEY_TYPE_REFUSED,
            f"Key type {key_type[:40]!r} is not accepted; use one of: "
            f"{', '.join(sorted(ALLOWED_TYPES))}.",
            field="public_key",
        )
    try:
        blob = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise Refused(
            ProjectErrorCode.INVALID_KEY, "The key's data is not valid base64.", field="public_key"
        ) from exc
    try:
        parts = _strings(blob)
    except ValueError as exc:
        raise Refused(
            ProjectErrorCode.INVALID_KEY,
            f"This {key_type} key is damaged: {exc}.",
            field="public_key",
        ) from exc
    problem = _problem(key_type, parts)
    if problem:
        raise Refused(
            ProjectErrorCode.INVALID_KEY,
            f"This {key_type} key is damaged: {problem}.",
            field="public_key",
        )
    return PublicKey(key_type=key_type, blob=blob, comment=comment)


def _problem(key_type: str, parts: list[bytes]) -> str:
    if not parts or parts[0] != key_type.encode():
        return "its data names another key type"
    curve = ALLOWED_TYPES[key_type]
    security_key = key_type.startswith("sk-")
    expected = 3 if key_type == "ssh-rsa" or curve else 2
    if security_key:
        expected += 1  # the application ("ssh:")
    if len(parts) != expected:
        return "it has the wrong number of fields"
    if key_type == "ssh-rsa":
        modulus = int.from_bytes(parts[2], "big")
        if int.from_bytes(parts[1], "big") < 3 or modulus.bit_length() < MIN_RSA_BITS:
            return f"RSA keys need at least {MIN_RSA_BITS} bits"
        return ""
    if curve:
        if parts[1] != curve.encode():
            return "its curve does not match its type"
        point = parts[2]
        if len(point) != EC_POINT_BYTES[curve] or point[0] != 4:
            return "its public point has the wrong size"
        return ""
    if len(parts[1]) != 32:
        return "an Ed25519 key is 32 bytes"
    return ""


def add_key(user, name: str, public_key: str) -> SshKey:
    """Store a key for ``user``. Refused for a bad key, a name or key the user has already,
    or more than MAX_KEYS_PER_USER keys; nothing is stored then."""
    name = (name or "").strip()
    if not name:
        raise Refused(ProjectErrorCode.NAME_REQUIRED, "Give the key a name.", field="name")
    if len(name) > 64:
        raise Refused(
            ProjectErrorCode.NAME_TOO_LONG, "A key's name is at most 64 characters.", field="name"
        )
    key = parse_public_key(public_key)
    with transaction.atomic():
        if SshKey.objects.filter(owner=user).count() >= MAX_KEYS_PER_USER:
            raise Refused(
                ProjectErrorCode.TOO_MANY_KEYS,
                f"You have {MAX_KEYS_PER_USER} keys, the most one may keep.",
            )
        if SshKey.objects.filter(owner=user, name=name).exists():
            raise Refused(
                ProjectErrorCode.DUPLICATE_NAME,
                "You have a key with this name already.",
                field="name",
            )
        if SshKey.objects.filter(owner=user, fingerprint=key.fingerprint).exists():
            raise Refused(
                ProjectErrorCode.DUPLICATE_KEY,
                "You have added this key already.",
                field="public_key",
            )
        try:
            with transaction.atomic():
                return SshKey.objects.create(
                    owner=user, name=name, public_key=key.line, fingerprint=key.fingerprint
                )
        except IntegrityError as exc:  # the same key or name added at the same moment
            raise Refused(
                ProjectErrorCode.DUPLICATE_KEY, "You have this key or name already."
            ) from exc


def delete_key(user, key_id: int) -> bool:
    """Remove one of ``user``'s keys; False when the user has no such key."""
    deleted, _ = SshKey.objects.filter(owner=user, pk=key_id).delete()
    return bool(deleted)


def authorized_keys(user) -> list[str]:
    """The user's keys as authorized_keys lines, oldest first (none for no user)."""
    if user is None:
        return []
    return list(
        SshKey.objects.filter(owner=user).order_by("pk").values_list("public_key", flat=True)
    )

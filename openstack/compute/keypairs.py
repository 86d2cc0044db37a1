"""Key pairs (``os-keypairs``): the caller's Corral SSH keys, as Nova shows key pairs.

A key pair's name is the key's name; importing one adds the key with ``project.sshkeys``
(its checks and limits), creating one without a public key makes an RSA key of 2048 bits, as
Nova does, and answers its private key once: Corral keeps only the public half. Corral keeps
a user's keys to that user, so ``user_id`` (2.10) may only name the caller, admins included.
"""

from __future__ import annotations

import base64
import hashlib
import re

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from openstack.compute.base import Conflict, NovaView, missing, policy_refused
from project import sshkeys
from project.error_codes import ProjectErrorCode
from project.errors import Refused
from project.models import SshKey

# Nova's schema for a key pair's name (parameter_types.keypair_name_special_chars).
NOVA_NAME = re.compile(r"[_\- a-zA-Z0-9]+")
NOVA_NAME_MAX = 255
CORRAL_NAME_MAX = SshKey._meta.get_field("name").max_length
GENERATED_BITS = 2048
GENERATED_COMMENT = "Generated-by-Corral"


def nova_fingerprint(public_key: str) -> str:
    """Nova's fingerprint of an OpenSSH public key line: MD5 of its data, colon-separated."""
    digest = hashlib.md5(base64.b64decode(public_key.split()[1]), usedforsecurity=False)
    raw = digest.hexdigest()
    return ":".join(raw[i : i + 2] for i in range(0, len(raw), 2))


def generated_key() -> tuple[str, str]:
    """A new RSA key as Nova makes one: (private key in PEM, public key line)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=GENERATED_BITS)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode()} {GENERATED_COMMENT}"


def checked_name(value) -> str:
    """A name Nova accepts and Corral can keep (400 naming ``name`` otherwise)."""
    if not isinstance(value, str):
        raise ValidationError({"name": "A key pair's name is a string."})
    if not value or len(value) > NOVA_NAME_MAX or not NOVA_NAME.fullmatch(value):
        raise ValidationError(
            {"name": "Use 1 to 255 letters, digits, spaces, '_' and '-' in a key pair's name."}
        )
    if value != value.strip():
        raise ValidationError({"name": "A key pair's name may not start or end with a space."})
    if len(value) > CORRAL_NAME_MAX:
        raise ValidationError(
            {"name": f"Corral keeps key pair names of at most {CORRAL_NAME_MAX} characters."}
        )
    return value


class KeypairBase(NovaView):
    policy = ""

    def check_user(self, user_id) -> None:
        """``user_id`` (2.10) may only name the caller: a user's SSH keys are theirs alone."""
        if user_id is None or not self.at_least(2, 10):
            return
        if str(user_id) != str(self.request.user.pk):
            raise policy_refused(f"os_compute_api:os-keypairs:{self.policy}")

    def keypair_view(self, key: SshKey, *, detail: bool) -> dict:
        body = {
            "name": key.name,
            "public_key": key.public_key,
            "fingerprint": nova_fingerprint(key.public_key),
        }
        if self.at_least(2, 2):
            body["type"] = "ssh"
        if detail:
            body |= {
                "user_id": str(key.owner_id),
                "id": key.pk,
                "created_at": key.created_at.strftime("%Y-%m-%dT%H:%M:%S.%f"),
                "updated_at": None,
                "deleted": False,
                "deleted_at": None,
            }
        return body

    def own_key(self, name: str) -> SshKey:
        found = SshKey.objects.filter(owner=self.request.user, name=name).first()
        if found is None:
            raise missing(f"Keypair {name} not found for user {self.request.user.pk}")
        return found


class KeypairsView(KeypairBase):
    def get(self, request):
        self.policy = "index"
        self.check_user(request.query_params.get("user_id"))
        keys = SshKey.objects.filter(owner=request.user).order_by("name", "pk")
        return Response(
            {"keypairs": [{"keypair": self.keypair_view(key, detail=False)} for key in keys]}
        )

    def post(self, request):
        self.policy = "create"
        given = self.body("keypair")
        self.check_user(given.get("user_id"))
        name = checked_name(given.get("name"))
        key_type = given.get("type", "ssh") if self.at_least(2, 2) else "ssh"
        if key_type not in ("ssh", "x509"):
            raise ValidationError({"type": "A key pair's type is 'ssh' or 'x509'."})
        if key_type == "x509":
            raise ValidationError({"type": "Corral keeps SSH keys only: x509 is not supported."})
        private = None
        public = given.get("public_key")
        if public is None:
            private, public = generated_key()
        elif not isinstance(public, str):
            raise ValidationError({"public_key": "A public key is a string."})
        try:
            key = sshkeys.add_key(request.user, name, public)
        except Refused as refused:
            raise nova_refusal(refused, name) from refused
        body = self.keypair_view(key, detail=False) | {"user_id": str(key.owner_id)}
        if private is not None:
            body["private_key"] = private
        # Nova answers a create with 201 from 2.2 on, 200 before.
        code = status.HTTP_201_CREATED if self.at_least(2, 2) else status.HTTP_200_OK
        return Response({"keypair": body}, status=code)


def nova_refusal(refused: Refused, name: str) -> Exception:
    """A refusal of ``project.sshkeys`` in Nova's terms."""
    if refused.code == ProjectErrorCode.DUPLICATE_NAME:
        return Conflict(f"Key pair '{name}' already exists.")
    if refused.code == ProjectErrorCode.TOO_MANY_KEYS:
        return PermissionDenied(f"Quota exceeded, too many key pairs. {refused.message}")
    if refused.field == "public_key":
        return ValidationError(
            {"public_key": f"Keypair data is invalid: {refused.message}"}, code=refused.code
        )
    if refused.field:
        return ValidationError({refused.field: refused.message}, code=refused.code)
    return Conflict(refused.message)


class KeypairView(KeypairBase):
    def get(self, request, name: str):
        self.policy = "show"
        self.check_user(request.query_params.get("user_id"))
        return Response({"keypair": self.keypair_view(self.own_key(name), detail=True)})

    def delete(self, request, name: str):
        self.policy = "delete"
        self.check_user(request.query_params.get("user_id"))
        key = self.own_key(name)
        sshkeys.delete_key(request.user, key.pk)
        # 202 before 2.2, 204 from it (Nova's codes).
        code = status.HTTP_204_NO_CONTENT if self.at_least(2, 2) else status.HTTP_202_ACCEPTED
        return Response(status=code)

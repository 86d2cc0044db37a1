"""Key pairs (``os-keypairs``): the caller's Corral SSH keys, as Nova shows key pairs.

A key pair's name is the key's name; importing one adds the key with ``project.sshkeys``
(its checks and limits), creating one without a public key makes an RSA key of 2048 bits, as
Nova does, and answers its private key once: Corral keeps only the public half. Corral keeps
a user's keys to that user, so ``user_id`` (2.10) may only name the caller, admins included.
"""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from openstack.compute import services
from openstack.compute.base import NovaView, missing, policy_refused
from openstack.compute.bodies import checked_name
from openstack.compute.presenters import keypair_body
from project import sshkeys
from project.models import SshKey


class KeypairBase(NovaView):
    policy = ""

    def check_user(self, user_id) -> None:
        """``user_id`` (2.10) may only name the caller: a user's SSH keys are theirs alone."""
        if user_id is None or not self.at_least(2, 10):
            return
        if str(user_id) != str(self.request.user.pk):
            raise policy_refused(f"os_compute_api:os-keypairs:{self.policy}")

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
            {"keypairs": [{"keypair": keypair_body(self, key, detail=False)} for key in keys]}
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
        public = given.get("public_key")
        if public is not None and not isinstance(public, str):
            raise ValidationError({"public_key": "A public key is a string."})
        key, private = services.create_keypair(request.user, name, public)
        body = keypair_body(self, key, detail=False) | {"user_id": str(key.owner_id)}
        if private is not None:
            body["private_key"] = private
        # Nova answers a create with 201 from 2.2 on, 200 before.
        code = status.HTTP_201_CREATED if self.at_least(2, 2) else status.HTTP_200_OK
        return Response({"keypair": body}, status=code)


class KeypairView(KeypairBase):
    def get(self, request, name: str):
        self.policy = "show"
        self.check_user(request.query_params.get("user_id"))
        return Response({"keypair": keypair_body(self, self.own_key(name), detail=True)})

    def delete(self, request, name: str):
        self.policy = "delete"
        self.check_user(request.query_params.get("user_id"))
        key = self.own_key(name)
        sshkeys.delete_key(request.user, key.pk)
        # 202 before 2.2, 204 from it (Nova's codes).
        code = status.HTTP_204_NO_CONTENT if self.at_least(2, 2) else status.HTTP_202_ACCEPTED
        return Response(status=code)

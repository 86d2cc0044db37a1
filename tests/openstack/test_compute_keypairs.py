"""Nova's key pairs are the caller's Corral SSH keys: imported, generated, shown by name,
deleted; another user's keys do not exist for the caller."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from openstack.compute.presenters import nova_fingerprint
from project import sshkeys
from project.models import SshKey
from tests.openstack.conftest import nova_get

pytestmark = pytest.mark.django_db
V = "/compute/v2.1"
KEYPAIRS = f"{V}/os-keypairs"


def public_key(comment: str = "ann@laptop") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{line.decode()} {comment}"


def create(client, version: str = "2.1", **keypair):
    return client.post(
        KEYPAIRS,
        {"keypair": keypair},
        format="json",
        HTTP_OPENSTACK_API_VERSION=f"compute {version}",
    )


def test_importing_a_public_key_adds_it_to_the_callers_ssh_keys(nova_for, make_user):
    user = make_user()
    line = public_key()

    made = create(nova_for(user), name="laptop", public_key=line)

    assert made.status_code == 200
    body = made.json()["keypair"]
    stored = SshKey.objects.get(owner=user)
    assert (stored.name, stored.public_key) == ("laptop", line)
    assert body == {
        "name": "laptop",
        "public_key": line,
        "fingerprint": nova_fingerprint(line),
        "user_id": str(user.pk),
    }
    assert "private_key" not in body


def test_the_fingerprint_is_novas_md5_of_the_key_in_colon_pairs():
    line = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnK0cqtxY3MNqxG3BRdrnpGnM5FbZ9FqMY3pJ6wKXmO x"

    # What `ssh-keygen -l -E md5` says of this key.
    assert nova_fingerprint(line) == "46:67:88:f8:4b:13:bc:d3:34:b5:0f:73:d6:19:ba:2e"


def test_creating_without_a_public_key_generates_one_and_answers_its_private_key_once(
    nova_for, make_user
):
    user = make_user()
    nova = nova_for(user)

    made = create(nova, "2.2", name="generated")
    shown = nova_get(nova, f"{KEYPAIRS}/generated")["keypair"]

    assert made.status_code == 201
    body = made.json()["keypair"]
    assert body["private_key"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert body["public_key"].startswith("ssh-rsa ")
    assert body["type"] == "ssh"
    private = serialization.load_pem_private_key(body["private_key"].encode(), password=None)
    assert private.key_size == 2048
    assert sshkeys.authorized_keys(user) == [body["public_key"]]
    assert "private_key" not in shown
    assert shown["fingerprint"] == body["fingerprint"]


def test_the_list_and_show_have_novas_fields_by_microversion(nova_for, make_user):
    user = make_user()
    nova = nova_for(user)
    line = public_key()
    create(nova, name="laptop", public_key=line)

    old = nova_get(nova, KEYPAIRS)["keypairs"]
    new = nova.get(KEYPAIRS, HTTP_OPENSTACK_API_VERSION="compute 2.2").json()["keypairs"]
    shown = nova.get(f"{KEYPAIRS}/laptop", HTTP_OPENSTACK_API_VERSION="compute 2.2").json()

    assert old == [
        {"keypair": {"name": "laptop", "public_key": line, "fingerprint": nova_fingerprint(line)}}
    ]
    assert new[0]["keypair"]["type"] == "ssh"
    key = shown["keypair"]
    stored = SshKey.objects.get(owner=user)
    assert (key["id"], key["user_id"], key["deleted"], key["type"]) == (
        stored.pk,
        str(user.pk),
        False,
        "ssh",
    )
    assert key["created_at"].startswith(f"{stored.created_at:%Y-%m-%dT%H:%M:%S}")


def test_deleting_a_keypair_removes_the_ssh_key(nova_for, make_user):
    user = make_user()
    nova = nova_for(user)
    create(nova, name="laptop", public_key=public_key())

    old = nova.delete(f"{KEYPAIRS}/laptop")
    create(nova, name="desk", public_key=public_key())
    new = nova.delete(f"{KEYPAIRS}/desk/", HTTP_OPENSTACK_API_VERSION="compute 2.2")

    assert (old.status_code, new.status_code) == (202, 204)
    assert not SshKey.objects.filter(owner=user).exists()


def test_another_users_keypair_does_not_exist_for_the_caller(nova_for, make_user):
    owner, other = make_user(), make_user()
    create(nova_for(owner), name="laptop", public_key=public_key())

    shown = nova_for(other).get(f"{KEYPAIRS}/laptop")
    deleted = nova_for(other).delete(f"{KEYPAIRS}/laptop")

    assert shown.status_code == 404
    assert shown.json()["itemNotFound"]["message"] == (
        f"Keypair laptop not found for user {other.pk}"
    )
    assert deleted.status_code == 404
    assert SshKey.objects.filter(owner=owner).count() == 1
    assert nova_get(nova_for(other), KEYPAIRS)["keypairs"] == []


def test_a_name_in_use_is_novas_409(nova_for, make_user):
    nova = nova_for(make_user())
    create(nova, name="laptop", public_key=public_key())

    again = create(nova, name="laptop", public_key=public_key())

    assert again.status_code == 409
    assert again.json()["conflictingRequest"]["message"] == "Key pair 'laptop' already exists."


def test_a_key_corral_refuses_is_a_400_naming_public_key(nova_for, make_user):
    nova = nova_for(make_user())

    refused = create(nova, name="old", public_key="ssh-dss AAAAB3NzaC1kc3MAAACBAP== x")

    assert refused.status_code == 400
    message = refused.json()["badRequest"]["message"]
    assert message.startswith("Invalid input for field/attribute public_key: Keypair data is")
    assert "'ssh-dss' is not accepted" in message


def test_names_nova_refuses_and_names_too_long_for_corral_are_400s_naming_name(nova_for, make_user):
    nova = nova_for(make_user())

    slash = create(nova, name="a/b", public_key=public_key())
    long = create(nova, name="k" * 65, public_key=public_key())
    missing = create(nova, public_key=public_key())

    assert slash.status_code == long.status_code == missing.status_code == 400
    assert "field/attribute name: Use 1 to 255 letters" in slash.json()["badRequest"]["message"]
    assert long.json()["badRequest"]["message"] == (
        "Invalid input for field/attribute name: Corral keeps key pair names of at most 64 "
        "characters."
    )
    assert "field/attribute name" in missing.json()["badRequest"]["message"]
    assert not SshKey.objects.exists()


def test_a_body_without_a_keypair_object_is_a_400(nova_for, make_user):
    refused = nova_for(make_user()).post(KEYPAIRS, {"name": "x"}, format="json")

    assert refused.status_code == 400
    assert "keypair" in refused.json()["badRequest"]["message"]


def test_x509_key_pairs_are_refused_from_2_2(nova_for, make_user):
    refused = create(nova_for(make_user()), "2.2", name="cert", type="x509")

    assert refused.status_code == 400
    assert refused.json()["badRequest"]["message"] == (
        "Invalid input for field/attribute type: Corral keeps SSH keys only: x509 is not supported."
    )
    assert not SshKey.objects.exists()


def test_user_id_may_name_only_the_caller_even_for_an_admin(nova_for, make_user, admin_user):
    user = make_user()
    nova = nova_for(admin_user)

    own = create(nova, "2.10", name="mine", public_key=public_key(), user_id=str(admin_user.pk))
    other = create(nova, "2.10", name="theirs", public_key=public_key(), user_id=str(user.pk))
    listed = nova.get(f"{KEYPAIRS}?user_id={user.pk}", HTTP_OPENSTACK_API_VERSION="compute 2.10")

    assert own.status_code == 201
    assert other.status_code == 403
    assert other.json()["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-keypairs:create to be performed."
    )
    assert listed.status_code == 403
    assert not SshKey.objects.filter(owner=user).exists()


def test_the_most_keys_a_user_may_keep_is_novas_quota_403(nova_for, make_user, settings):
    user = make_user()
    nova = nova_for(user)
    for n in range(sshkeys.MAX_KEYS_PER_USER):
        sshkeys.add_key(user, f"k{n}", public_key())

    refused = create(nova, name="one-more", public_key=public_key())

    assert refused.status_code == 403
    assert refused.json()["forbidden"]["message"].startswith("Quota exceeded, too many key pairs.")

"""Users' SSH public keys: only real OpenSSH keys of accepted types are stored, fingerprinted as
``ssh-keygen -l`` prints them, and each user sees and deletes only their own (others': 404)."""

import base64

import pytest

from project.models import SshKey
from tests.project.sshkeys_data import (
    ECDSA,
    ED25519,
    ED25519_FINGERPRINT,
    RSA,
    RSA_1024,
    RSA_FINGERPRINT,
)

URL = "/api/me/sshkeys/"


def _damaged(key: str) -> str:
    key_type, data, *rest = key.split()
    blob = base64.b64decode(data)
    return " ".join([key_type, base64.b64encode(blob[:-3]).decode(), *rest])


@pytest.mark.parametrize(
    ("key", "fingerprint"), [(ED25519, ED25519_FINGERPRINT), (RSA, RSA_FINGERPRINT)]
)
def test_a_user_adds_a_key_and_sees_its_openssh_fingerprint(
    make_user, client_for, key, fingerprint
):
    user = make_user()

    response = client_for(user).post(URL, {"name": "laptop", "public_key": key}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["fingerprint"] == fingerprint
    assert response.json()["public_key"] == key
    listed = client_for(user).get(URL).json()
    assert [k["name"] for k in listed["results"]] == ["laptop"]


@pytest.mark.parametrize(
    ("public_key", "words"),
    [
        ("", "blank"),
        ("not a key", "not accepted"),
        ("ssh-ed25519", "not an OpenSSH public key"),
        ("ssh-ed25519 !!!notbase64!!!", "base64"),
        (_damaged(ED25519), "damaged"),
        (ED25519.replace("ssh-ed25519", "ssh-rsa", 1), "another key type"),
        (RSA_1024, "2048 bits"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "not accepted"),
        (ED25519 + "\n" + ECDSA, "one line"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "not accepted"),
    ],
)
def test_a_bad_key_is_refused_on_its_field_and_nothing_is_stored(
    make_user, client_for, public_key, words
):
    response = client_for(make_user()).post(
        URL, {"name": "k", "public_key": public_key}, format="json"
    )

    assert response.status_code == 400, response.content
    assert words in str(response.json()["public_key"])
    assert not SshKey.objects.exists()


def test_the_same_key_or_name_twice_is_refused(make_user, client_for):
    client = client_for(make_user())
    assert client.post(URL, {"name": "a", "public_key": ED25519}, format="json").status_code == 201

    same_key = client.post(URL, {"name": "b", "public_key": ED25519}, format="json")
    same_name = client.post(URL, {"name": "a", "public_key": ECDSA}, format="json")

    assert same_key.status_code == 400 and "already" in str(same_key.json()["public_key"])
    assert same_name.status_code == 400 and "already" in str(same_name.json()["name"])
    assert SshKey.objects.count() == 1


def test_users_never_see_or_delete_each_others_keys(make_user, client_for):
    alice, bob = make_user(), make_user()
    response = client_for(alice).post(URL, {"name": "a", "public_key": ED25519}, format="json")
    key_id = response.json()["id"]

    assert client_for(bob).get(URL).json()["results"] == []
    assert client_for(bob).get(f"{URL}{key_id}/").status_code == 404
    assert client_for(bob).delete(f"{URL}{key_id}/").status_code == 404
    assert SshKey.objects.filter(pk=key_id).exists()
    assert client_for(alice).delete(f"{URL}{key_id}/").status_code == 204
    assert not SshKey.objects.filter(pk=key_id).exists()


def test_anonymous_callers_are_refused(client_for):
    response = client_for(None).get(URL)

    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == "Token"


def test_the_portal_adds_lists_and_deletes_keys_with_errors_on_the_form(make_user, client):
    user = make_user()
    client.force_login(user)

    bad = client.post("/keys/", {"name": "laptop", "public_key": "ssh-ed25519 AAAA"})
    assert bad.status_code == 400
    assert "damaged" in bad.content.decode() or "base64" in bad.content.decode()

    added = client.post("/keys/", {"name": "laptop", "public_key": ECDSA}, follow=True)
    page = added.content.decode()
    assert "laptop" in page and SshKey.objects.get(owner=user).fingerprint in page

    key = SshKey.objects.get(owner=user)
    other = make_user()
    client.force_login(other)
    assert client.post(f"/keys/{key.pk}/delete/").status_code == 404
    assert "laptop" not in client.get("/keys/").content.decode()
    client.force_login(user)
    client.post(f"/keys/{key.pk}/delete/")
    assert not SshKey.objects.exists()


def test_the_keys_page_says_both_ways_keys_reach_a_guest(make_user, client):
    client.force_login(make_user())

    page = client.get("/keys/").content.decode()

    said = page.split('id="ssh-keys-how">', 1)[1].split("</p>", 1)[0]
    assert "reads them through cloud-init when it boots" in said
    assert "gets them at once through that agent" in said

"""Fixtures for Blazar's API: clients that send an X-Auth-Token as OpenStack clients do, and
request bodies shaped as Blazar's own client sends them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from project.access.tokens import issue as issue_token

PASSWORD = "pw-Corral-1"  # what tests.conftest.make_user gives every user
API = "/reservation/v1"


@pytest.fixture
def blazar_for(db):
    """blazar_for(user) -> an APIClient sending the user's token in X-Auth-Token (and CSRF
    checks on, as for any browser: a token-authenticated request must not need them)."""

    keys: dict[int, str] = {}

    def make(user) -> APIClient:
        if user.pk not in keys:
            keys[user.pk] = issue_token(user)[1]
        client = APIClient(enforce_csrf_checks=True)
        client.credentials(HTTP_X_AUTH_TOKEN=keys[user.pk])
        return client

    return make


def cli_time(moment) -> str:
    """A time as Blazar's client sends it: "YYYY-MM-DD HH:MM" (UTC)."""
    return f"{moment:%Y-%m-%d %H:%M}"


def cli_instances(amount: int, *, vcpus: int = 1, memory_mb: int = 1024, affinity="None", **more):
    """A virtual:instance reservation exactly as ``openstack reservation lease create
    --reservation resource_type=virtual:instance,...`` sends it (options left out are "")."""
    return {
        "vcpus": vcpus,
        "memory_mb": memory_mb,
        "disk_gb": "",
        "amount": amount,
        "affinity": affinity,
        "resource_properties": "",
        "resource_type": "virtual:instance",
        **more,
    }


def cli_hosts(minimum: int, maximum: int, **more):
    """A physical:host reservation as Blazar's client sends it."""
    return {
        "min": minimum,
        "max": maximum,
        "hypervisor_properties": "",
        "resource_properties": "",
        "resource_type": "physical:host",
        **more,
    }


def lease_body(name: str, start, end, *reservations) -> dict:
    """A lease create body as blazarclient's ``lease.create()`` sends it."""
    return {
        "name": name,
        "start_date": start if isinstance(start, str) else cli_time(start),
        "end_date": cli_time(end),
        "reservations": list(reservations),
        "events": [],
        "before_end_date": None,
    }


@pytest.fixture
def nova_for(blazar_for):
    """nova_for(user) -> an APIClient sending the user's token in X-Auth-Token (Nova's API
    authenticates as Blazar's does)."""
    return blazar_for


def nova_get(client: APIClient, path: str) -> dict:
    response = client.get(path)
    assert response.status_code == 200, response.content
    return response.json()


REPO = Path(__file__).resolve().parents[2]
# The Makefile's OPENSTACK_VENV: another virtualenv (a client pair being tried) when set.
CLIENTS = REPO / os.environ.get("OPENSTACK_VENV", "var/openstack-venv") / "bin"
SCRIPT = Path(__file__).with_name("blazarclient_session.py")


@pytest.fixture(scope="session")
def openstack_clients():
    """The clients' virtualenv, made (or brought up to date) by the Makefile's target."""
    subprocess.run(["make", "-s", "openstack-clients"], cwd=REPO, check=True, timeout=900)
    return CLIENTS


@pytest.fixture
def server_env():
    """The environment of the server ``cloud`` starts (a module may override it)."""
    return {}


@pytest.fixture
def shared_image_store(tmp_path, settings) -> dict:
    """An image store of the test's own, for this process and (as the environment returned) for
    the servers it starts: a module's ``server_env`` returns it where images are uploaded."""
    store = tmp_path / "images"
    settings.CORRAL_IMAGE_STORE = store
    return {"CORRAL_IMAGE_STORE": str(store)}


@pytest.fixture
def cloud(openstack_clients, asgi_server, server_env, tmp_path):
    """cloud(username) -> run(*args, ok=True): `openstack --os-cloud <username> ...` against a
    running Corral, through a clouds.yaml such as a user would write."""
    server = asgi_server(**server_env)
    clouds_yaml = tmp_path / "clouds.yaml"
    env = {
        "PATH": f"{openstack_clients}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OS_CLIENT_CONFIG_FILE": str(clouds_yaml),
        "LC_ALL": "C.UTF-8",
    }
    names: list[str] = []

    def for_user(username: str):
        names.append(username)
        clouds_yaml.write_text(
            "clouds:\n"
            + "".join(
                f"  {name}:\n"
                f"    auth:\n"
                f"      auth_url: {server.url}/identity/v3\n"
                f"      username: {name}\n"
                f"      password: {PASSWORD}\n"
                f"      project_name: {name}\n"
                f"      user_domain_name: Default\n"
                f"      project_domain_name: Default\n"
                f"    region_name: RegionOne\n"
                f"    interface: public\n"
                f"    identity_api_version: 3\n"
                for name in names
            )
        )

        def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
            done = subprocess.run(
                [str(openstack_clients / "openstack"), "--os-cloud", username, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            done.stderr = "\n".join(done.stderr.splitlines())  # without the last line's end
            if ok:
                assert done.returncode == 0, f"{args}: {done.stderr}"
                assert done.stderr == "", f"{args}: {done.stderr}"
            else:
                assert done.returncode != 0, f"{args} succeeded: {done.stdout}"
            return done

        return run

    for_user.url = server.url
    return for_user


def as_json(done: subprocess.CompletedProcess):
    """The JSON a command printed (create commands say "Created a new lease:" first)."""
    text = done.stdout
    return json.loads(text[min(i for i in (text.find("{"), text.find("[")) if i >= 0) :])

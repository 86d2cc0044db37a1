"""The real OpenStack clients against a running Corral, for any test of the suite (loaded by
tests/conftest.py): their virtualenvs (the CLI's, Ansible's), and ``cloud``, the ``openstack``
CLI as a user runs it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

PASSWORD = "pw-Corral-1"  # what tests.conftest.make_user gives every user
REPO = Path(__file__).resolve().parents[2]
# The Makefile's OPENSTACK_VENV: another virtualenv (a client pair being tried) when set.
CLIENTS = REPO / os.environ.get("OPENSTACK_VENV", "var/openstack-venv") / "bin"
# The Makefile's ANSIBLE_VENV: Ansible with its openstack.cloud collection.
ANSIBLE = REPO / os.environ.get("ANSIBLE_VENV", "var/ansible-venv") / "bin"


@pytest.fixture(scope="session")
def openstack_clients():
    """The clients' virtualenv, made (or brought up to date) by the Makefile's target."""
    subprocess.run(["make", "-s", "openstack-clients"], cwd=REPO, check=True, timeout=900)
    return CLIENTS


@pytest.fixture(scope="session")
def ansible_clients(openstack_clients):
    """Ansible's virtualenv, made by the same target as the clients'."""
    return ANSIBLE


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
    running Corral, through a clouds.yaml such as a user would write (``cloud.clouds_yaml``,
    with a cloud named after each user asked for so far)."""
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
    for_user.clouds_yaml = clouds_yaml
    return for_user

"""Fixtures for Blazar's API: clients that send an X-Auth-Token as OpenStack clients do, and
request bodies shaped as Blazar's own client sends them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from project.access.tokens import issue as issue_token

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


SCRIPT = Path(__file__).with_name("blazarclient_session.py")


def as_json(done: subprocess.CompletedProcess):
    """The JSON a command printed (create commands say "Created a new lease:" first)."""
    text = done.stdout
    return json.loads(text[min(i for i in (text.find("{"), text.find("[")) if i >= 0) :])

"""The lab is for development and tests: production settings leave it out and then refuse the
URIs of simulated hosts (light ones and libvirt's test driver), which development settings
accept. Checked in fresh interpreters, as a deployment would start."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, django
from django.conf import settings
django.setup()
from hosts.models import Host
def refusals(uri):
    try:
        Host(name="sim-1", uri=uri).clean_fields(exclude=["cluster"])
    except Exception as exc:
        return exc.message_dict.get("uri", [])
    return []
light = "lightsim+unix:///light-1?socket=%s/lightsim/sock" % settings.CORRAL_SIMHOSTS_DIR
print(json.dumps({"lab": "lab" in settings.INSTALLED_APPS, "uri": refusals(light),
                  "test_uri": refusals("test:///default")}))
"""


def probe(tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    base.update(DJANGO_SETTINGS_MODULE="project.settings", CORRAL_VAR_DIR=str(tmp_path / "var"))
    base.update(env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_production_settings_leave_the_lab_out_and_refuse_a_simulated_host(tmp_path):
    seen = probe(tmp_path, DEBUG="0", SECRET_KEY="s" * 50, ALLOWED_HOSTS="corral.example.org")
    assert seen["lab"] is False
    assert seen["uri"] == [
        "Corral does not open 'lightsim' URIs: the libvirt driver it supports is qemu."
    ]
    assert seen["test_uri"] == [
        "test URIs name simulated hosts, which only Corral's lab runs (development and tests); "
        "this installation does not."
    ]


def test_development_settings_install_the_lab_and_accept_a_simulated_host(tmp_path):
    assert probe(tmp_path, DEBUG="1") == {"lab": True, "uri": [], "test_uri": []}


@pytest.mark.parametrize("command", ["simhosts", "fleethosts", "tinyguest", "devstack"])
def test_production_has_no_lab_commands(tmp_path, command):
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG"}}
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        CORRAL_VAR_DIR=str(tmp_path / "var"),
        DEBUG="0",
        SECRET_KEY="s" * 50,
        ALLOWED_HOSTS="corral.example.org",
    )
    done = subprocess.run(
        [sys.executable, "manage.py", command, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"Unknown command: '{command}'" in done.stderr

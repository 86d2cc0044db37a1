"""The Hosts list's action "Trust the SSH host keys they offer" (hosts/admin/host_keys.py): a
confirmation page lists each selected host with the fingerprint of the key it offers, or why it
is left out; confirming trusts exactly those, each recorded in the admin's history and the event
feed; a host whose key changed in between, or that the admin may not change, is not trusted."""

from __future__ import annotations

import html as entities
import re

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.admin.models import LogEntry

from hosts import sshtrust
from hosts.models import Host, HostStatus
from project.models import Event
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db
ACTION = "trust_offered_host_keys"


def new_key() -> str:
    """A host key line as ``ssh-keyscan`` reads one (``type base64``)."""
    public = Ed25519PrivateKey.generate().public_key()
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return sshtrust.host_key(line.decode())


def waiting(make_host, cluster, name: str) -> Host:
    """A qemu+ssh host after an upgrade: no key trusted, the one it offers read by the sync."""
    return make_host(
        cluster,
        name=name,
        ssh_host_key_offered=new_key(),
        status=HostStatus.ERROR,
        status_reason="host_key_unknown",
    )


@pytest.fixture
def fleet(make_host, cluster_a):
    """Two hosts waiting for their first key, and one each that is left out and why."""
    changed_from = new_key()
    return {
        "kvm-1": waiting(make_host, cluster_a, "kvm-1"),
        "kvm-2": waiting(make_host, cluster_a, "kvm-2"),
        "unread": make_host(cluster_a, name="unread"),
        "trusted": make_host(cluster_a, name="trusted", ssh_host_key=new_key()),
        "changed": make_host(
            cluster_a, name="changed", ssh_host_key=changed_from, ssh_host_key_offered=new_key()
        ),
        "local": make_host(cluster_a, name="local", uri="qemu:///system"),
    }


def confirmation(response) -> dict:
    """The confirmation page's form, as its "Yes" button posts it."""
    html = response.content.decode()
    form = re.search(r'<form method="post">(.*?)</form>', html, re.S)[1]
    data: dict = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        data.setdefault(name, []).append(value)
    data.pop("csrfmiddlewaretoken", None)
    return data


def rows(html: str, table: str) -> dict[str, str]:
    """The host of each row of the page's table ``table``, with the text of its last cell."""
    body = re.search(rf'<table id="{table}">(.*?)</table>', html, re.S)[1]
    found = {}
    for name, row in re.findall(r'<tr data-host="([^"]+)">(.*?)</tr>', body, re.S):
        last = re.findall(r"<td>(.*?)</td>", row, re.S)[-1]
        found[name] = entities.unescape(re.sub(r"<[^>]+>", "", last)).strip()
    return found


def test_the_confirmation_page_lists_each_hosts_offered_fingerprint_and_who_is_left_out(
    superuser_console, fleet
):
    response = run_action(superuser_console, "hosts.Host", ACTION, fleet.values())

    html = response.content.decode()
    assert response.status_code == 200
    assert rows(html, "host-keys-to-trust") == {
        name: sshtrust.fingerprint(fleet[name].ssh_host_key_offered) for name in ("kvm-1", "kvm-2")
    }
    left_out = rows(html, "host-keys-skipped")
    assert left_out.keys() == {"unread", "trusted", "changed", "local"}
    assert left_out["unread"].startswith("No key read from it yet")
    assert sshtrust.fingerprint(fleet["trusted"].ssh_host_key) in left_out["trusted"]
    changed = fleet["changed"]
    assert left_out["changed"].startswith("Its key changed")
    assert sshtrust.fingerprint(changed.ssh_host_key_offered) in left_out["changed"]
    assert left_out["local"] == "Not reached over SSH with Corral's own key and known hosts."
    assert not Host.objects.exclude(ssh_host_key="").exclude(name__in=["trusted", "changed"])


def test_confirming_trusts_exactly_the_keys_shown_and_records_each(
    superuser_console, admin_user, fleet
):
    shown = confirmation(run_action(superuser_console, "hosts.Host", ACTION, fleet.values()))
    # A key that changed is never trusted in a batch, even when its fingerprint is posted.
    changed = fleet["changed"]
    shown[f"fingerprint_{changed.pk}"] = sshtrust.fingerprint(changed.ssh_host_key_offered)
    shown["_selected_action"].append(str(changed.pk))

    response = superuser_console.post(admin_url("hosts.Host", "changelist"), shown, follow=True)

    for name in ("kvm-1", "kvm-2"):
        host = Host.objects.get(pk=fleet[name].pk)
        trusted = sshtrust.fingerprint(host.ssh_host_key)
        assert (trusted, host.ssh_host_key_offered, host.status) == (
            sshtrust.fingerprint(fleet[name].ssh_host_key_offered),
            "",
            HostStatus.CONNECTING,
        )
        logged = LogEntry.objects.get(object_id=str(host.pk), user=admin_user)
        assert logged.get_change_message() == f"Trusted the SSH host key {trusted}."
        event = Event.objects.filter(object_type="host", object_id=host.pk).latest("pk")
        assert admin_user.username in event.message and trusted in event.message
    assert Host.objects.get(pk=changed.pk).ssh_host_key == changed.ssh_host_key
    for name in ("unread", "trusted", "local"):
        assert Host.objects.get(pk=fleet[name].pk).ssh_host_key == fleet[name].ssh_host_key
    messages = dict(shown_messages(response))
    assert messages["success"].startswith("Corral trusts the SSH host keys of kvm-1 (SHA256:")
    assert messages["error"].startswith("Host changed was not trusted: Corral trusts SHA256:")


def test_a_host_whose_key_changed_after_the_page_was_shown_is_refused_not_trusted(
    superuser_console, fleet
):
    shown = confirmation(
        run_action(superuser_console, "hosts.Host", ACTION, [fleet["kvm-1"], fleet["kvm-2"]])
    )
    # The sync reads another key from kvm-1 meanwhile (reinstalled, or another machine there).
    other = new_key()
    Host.objects.filter(pk=fleet["kvm-1"].pk).update(ssh_host_key_offered=other)

    response = superuser_console.post(admin_url("hosts.Host", "changelist"), shown, follow=True)

    assert Host.objects.get(pk=fleet["kvm-1"].pk).ssh_host_key == ""
    assert (
        Host.objects.get(pk=fleet["kvm-2"].pk).ssh_host_key == fleet["kvm-2"].ssh_host_key_offered
    )
    (refused,) = [text for level, text in shown_messages(response) if level == "error"]
    assert refused.startswith("Host kvm-1 was not trusted: The host offers ")
    assert sshtrust.fingerprint(other) in refused
    assert not LogEntry.objects.filter(object_id=str(fleet["kvm-1"].pk)).exists()


def test_a_host_viewer_is_not_offered_the_action_and_cannot_post_it(
    staff_with_role, cluster_a, fleet
):
    viewer = logged_in(staff_with_role(["hosts.view_host"], cluster_a))
    host = fleet["kvm-1"]
    fingerprint = sshtrust.fingerprint(host.ssh_host_key_offered)

    listed = viewer.get(admin_url("hosts.Host", "changelist"))
    posted = run_action(
        viewer, "hosts.Host", ACTION, [host], post="yes", **{f"fingerprint_{host.pk}": fingerprint}
    )

    assert listed.status_code == 200 and ACTION not in listed.content.decode()
    assert Host.objects.get(pk=host.pk).ssh_host_key == ""
    assert fingerprint not in posted.content.decode()


def test_hosts_the_admin_may_only_see_are_left_out_and_refused(
    make_user, make_role, grant, make_host, cluster_a, cluster_b
):
    user = make_user(is_staff=True)
    grant(user, make_role("HostChanger", ["hosts.view_host", "hosts.change_host"]).name, cluster_a)
    grant(user, make_role("HostLooker", ["hosts.view_host"]).name, cluster_b)
    console = logged_in(user)
    mine, theirs = waiting(make_host, cluster_a, "mine"), waiting(make_host, cluster_b, "theirs")

    page = run_action(console, "hosts.Host", ACTION, [mine, theirs])
    forged = {
        **confirmation(page),
        "_selected_action": [mine.pk, theirs.pk],
        f"fingerprint_{theirs.pk}": sshtrust.fingerprint(theirs.ssh_host_key_offered),
    }
    response = console.post(admin_url("hosts.Host", "changelist"), forged, follow=True)

    assert rows(page.content.decode(), "host-keys-skipped") == {
        "theirs": "You may not change this host."
    }
    assert Host.objects.get(pk=theirs.pk).ssh_host_key == ""
    assert Host.objects.get(pk=mine.pk).ssh_host_key == mine.ssh_host_key_offered
    assert ("error", "You may not change host theirs.") in shown_messages(response)

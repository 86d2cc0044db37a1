"""A refused host URI already in the database never runs its program.

Rows written before the allowlist (or straight into the database) are checked again where
connections are opened: the driver refuses them, the lifecycle listener skips them, the sync
marks their host Error with the reason, and a job on such a host fails with ``uri_refused``.
Each URI here names a program that leaves a marker file behind; libvirt itself runs it when
handed the URI (the first test shows it), Corral never does.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import libvirt
import pytest

from hosts import driver, jobs, sync
from hosts.driver.libvirt.connection import connection
from hosts.driver.libvirt.events import LifecycleListener
from hosts.models import Host, HostStatus, Job, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from project.models import Event, EventKind
from tests.conftest import wait_until


def program_uris(script: Path) -> dict[str, str]:
    """URI -> a phrase of its refusal, for URIs that make libvirt run ``script``."""
    return {
        f"qemu+ext:///system?command={script}": "'ext' transport runs a program",
        f"qemu+ssh://kvm1.example.org/system?COMMAND={script}": "'COMMAND' names a program",
        f"qemu+ssh://kvm1.example.org/system?%63ommand={script}": "'%' escapes",
        f"qemu+ssh://kvm1.example.org/system?no_tty=1;command={script}": "is 0 or 1",
    }


def proxy_command_uris(script: Path) -> dict[str, str]:
    """ssh user names that are options (this machine's ssh refuses them too)."""
    return {
        f"qemu+ssh://-oProxyCommand={quote(str(script), safe='')}@kvm1.example.org/system": (
            "'%' escapes"
        ),
        "qemu+ssh://-oProxyCommand=touch@kvm1.example.org/system": "starts with '-'",
    }


@pytest.fixture
def marker(tmp_path) -> tuple[Path, Path]:
    """(script, file): a program that creates ``file`` whenever anything runs it."""
    ran = tmp_path / "ran"
    script = tmp_path / "marker.sh"
    script.write_text(f"#!/bin/sh\ntouch {ran}\n")
    script.chmod(0o755)
    return script, ran


def refused_host(make_host, uri: str, **fields) -> Host:
    """A host whose URI was written around validation (a row from before the allowlist)."""
    host = make_host(**fields)
    Host.objects.filter(pk=host.pk).update(uri=uri)
    return Host.objects.get(pk=host.pk)


def alerts_about(host: Host) -> list[str]:
    rows = Event.objects.filter(kind=EventKind.ALERT, object_type="host", object_id=host.pk)
    return list(rows.values_list("message", flat=True))


@pytest.mark.parametrize("which", range(4))
def test_libvirt_itself_runs_the_program_these_uris_name(marker, which):
    script, ran = marker
    uri = list(program_uris(script))[which]

    with pytest.raises(libvirt.libvirtError):
        libvirt.open(uri)

    assert ran.exists(), f"libvirt did not run the program of {uri}"


def test_the_driver_refuses_to_open_them(marker):
    script, ran = marker
    uris = {**program_uris(script), **proxy_command_uris(script)}

    for uri, phrase in uris.items():
        with pytest.raises(driver.UriRefused) as refused:
            connection(uri)
        assert refused.value.code == "uri_refused"
        assert phrase in refused.value.message
        with pytest.raises(driver.UriRefused):
            driver.host_report(uri)

    assert not ran.exists()


def test_the_lifecycle_listener_skips_them_and_watches_the_other_hosts(marker):
    script, ran = marker
    refused = program_uris(script)
    listener = LifecycleListener(lambda uri, domain_uuid, event: None)
    try:
        errors = listener.watch([*refused, "test:///default"])
        again = listener.watch([*refused, "test:///default"])
    finally:
        listener.close()

    assert set(errors) == set(again) == set(refused)
    for uri, phrase in refused.items():
        assert phrase in errors[uri]
    assert not ran.exists()


@pytest.mark.django_db
def test_the_sync_marks_the_host_error_once_and_leaves_its_vms_alone(marker, make_host, make_vm):
    script, ran = marker
    uri = f"qemu+ext:///system?command={script}"
    host = refused_host(make_host, uri, name="legacy", status="up")
    vm = make_vm(host.cluster, host=host, status="up", power_state="running")
    vm_before = VirtualMachine.objects.values().get(pk=vm.pk)

    first = sync.sync_host(host.pk)
    second = sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (first.host_status, second.host_status) == (HostStatus.ERROR, HostStatus.ERROR)
    assert host.status == HostStatus.ERROR
    assert "'ext' transport runs a program" in host.status_detail
    assert VirtualMachine.objects.values().get(pk=vm.pk) == vm_before
    assert len(alerts_about(host)) == 1
    assert "Host legacy is in error" in alerts_about(host)[0]
    assert not ran.exists()


@pytest.mark.django_db
def test_a_host_in_error_is_up_again_once_its_uri_is_one_corral_opens(marker, make_host):
    script, _ = marker
    host = refused_host(make_host, f"qemu+ext:///system?command={script}")
    sync.sync_host(host.pk)
    Host.objects.filter(pk=host.pk).update(uri="test:///default")

    result = sync.sync_host(host.pk)

    host.refresh_from_db()
    assert (result.host_status, host.status, host.status_detail) == (HostStatus.UP, "up", "")


@pytest.mark.django_db(transaction=True)
def test_a_job_on_such_a_host_fails_with_uri_refused(marker, make_host, make_vm, admin_user):
    from rest_framework.test import APIClient

    script, ran = marker
    host = refused_host(make_host, f"qemu+ext:///system?command={script}", status="up")
    vm = make_vm(host.cluster, host=host, status="down")
    client = APIClient()
    client.force_authenticate(admin_user)

    queued = client.post(f"/api/vms/{vm.pk}/start/", {}, format="json")
    assert queued.status_code == 202, queued.json()
    assert jobs.run(queued.json()["id"], OPERATION_BY_KIND) == "failed"

    job = client.get(f"/api/jobs/{queued.json()['id']}/").json()
    assert (job["state"], job["error"]["code"]) == ("failed", "uri_refused")
    assert "'ext' transport runs a program" in job["error"]["message"]
    assert Job.objects.get(pk=job["id"]).error_code == "uri_refused"
    assert not ran.exists()


@pytest.mark.slow
def test_a_task_cluster_never_runs_the_program_of_a_stored_uri(
    marker, make_cluster, make_host, task_cluster
):
    script, ran = marker
    cluster = make_cluster()
    uris = {**program_uris(script), **proxy_command_uris(script)}
    hosts = {
        refused_host(make_host, uri, cluster=cluster).pk: phrase for uri, phrase in uris.items()
    }

    running = task_cluster()

    def all_in_error() -> bool:
        rows = Host.objects.filter(pk__in=hosts).values_list("pk", "status", "status_detail")
        return all(status == "error" and hosts[pk] in detail for pk, status, detail in rows)

    wait_until(all_in_error, timeout=60, message=lambda: running.log()[-3000:])
    assert not ran.exists()
    assert "a tick failed" not in running.log()

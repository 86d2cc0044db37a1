"""Hosts in the admin console: status and load at a glance, maintenance and activation as
actions, and what runs on each host."""

from __future__ import annotations

import re
import uuid

import pytest

from hosts import driver, jobs, sync
from hosts.models import ExternalDomain, Host, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from project.models import Event
from tests.project.admin.fixtures import (
    admin_url,
    logged_in,
    run_action,
    shown_fields,
    shown_messages,
)

pytestmark = pytest.mark.django_db

FIGURES = ["CPUs", "Memory", "CPU in use", "Memory in use", "Storage capacity", "Free storage"]


@pytest.fixture
def reported_host(make_host, cluster_a):
    """An Up host of 16 CPUs and 3072 MiB, as a sync would have read it."""
    return make_host(
        cluster_a, name="kvm-1", status="up", cpus=16, memory_mb=3072, cpu_usage_percent=12.0
    )


def load_figures(html: str, resource: str) -> tuple[int, int]:
    match = re.search(rf'data-resource="{resource}" data-used="(\d+)" data-capacity="(\d+)"', html)
    assert match, f"no {resource} load bar on the page"
    return int(match.group(1)), int(match.group(2))


def test_the_host_list_shows_memory_and_vcpus_given_to_vms_against_capacity(
    superuser_console, reported_host, make_vm, cluster_a
):
    make_vm(cluster_a, host=reported_host, status="up", vcpus=2, memory_mb=1024)
    make_vm(cluster_a, host=reported_host, status="starting", vcpus=1, memory_mb=512)
    make_vm(cluster_a, host=reported_host, status="down", vcpus=8, memory_mb=1024)

    response = superuser_console.get(admin_url("hosts.Host", "changelist"))

    html = response.content.decode()
    assert load_figures(html, "memory") == (1536, 3072)
    assert load_figures(html, "vcpus") == (3, 64)  # 16 CPUs x the cluster's 4.0 overcommit
    assert "1536 of 3072 MiB" in html
    assert "host CPU 12%" in html


def test_a_vm_migrating_to_a_host_counts_on_its_destination(
    superuser_console, reported_host, make_host, make_vm, cluster_a
):
    source = make_host(cluster_a, name="kvm-2", status="up", cpus=16, memory_mb=3072)
    make_vm(
        cluster_a,
        host=source,
        migrating_to=reported_host,
        status="migrating",
        vcpus=1,
        memory_mb=256,
    )

    response = superuser_console.get(admin_url("hosts.Host", "change", reported_host.pk))

    assert load_figures(response.content.decode(), "memory") == (256, 3072)


def test_a_host_that_never_reported_says_so_instead_of_a_bar(superuser_console, make_host):
    make_host(name="new-host")

    response = superuser_console.get(admin_url("hosts.Host", "changelist"))

    assert "not reported yet" in response.content.decode()


def test_the_host_page_shows_the_hosts_figures_by_name_in_units_people_read(
    superuser_console, reported_host
):
    Host.objects.filter(pk=reported_host.pk).update(
        memory_used_mb=1536, storage_capacity_bytes=270553174016, storage_free_bytes=2**36
    )

    response = superuser_console.get(admin_url("hosts.Host", "change", reported_host.pk))

    shown = shown_fields(response)
    assert {name: shown[name] for name in FIGURES} == {
        "CPUs": "16",
        "Memory": "3 GiB",
        "CPU in use": "12 %",
        "Memory in use": "1.5 GiB",
        "Storage capacity": "252 GiB",
        "Free storage": "64 GiB",
    }


def test_a_host_that_never_reported_says_so_for_each_figure(superuser_console, make_host):
    host = make_host(name="new-host")

    response = superuser_console.get(admin_url("hosts.Host", "change", host.pk))

    shown = shown_fields(response)
    assert {shown[name] for name in FIGURES} == {"not reported yet"}


def test_status_names_are_words_in_the_console_and_codes_in_the_api(
    superuser_console, make_host, make_vm, cluster_a, client_for, admin_user
):
    lost = make_host(cluster_a, name="lost-1", status="non_responsive")
    make_vm(cluster_a, host=lost, name="web-1", status="unknown", power_state="report_missing")

    hosts = superuser_console.get(admin_url("hosts.Host", "changelist")).content.decode()
    vms = superuser_console.get(admin_url("hosts.VirtualMachine", "changelist")).content.decode()
    api = client_for(admin_user).get(f"/api/hosts/{lost.pk}/").json()

    assert '<td class="field-status">Not responding</td>' in hosts
    assert '<td class="field-power_state">Power report missing</td>' in vms
    assert "NonResponsive" not in hosts and "PowerReportMissing" not in vms
    assert api["status"] == "non_responsive"


def test_the_host_page_lists_its_vms_and_the_domains_corral_does_not_manage(
    superuser_console, reported_host, make_vm, cluster_a
):
    make_vm(cluster_a, host=reported_host, name="web-1", status="up")
    ExternalDomain.objects.create(
        host=reported_host, uuid=uuid.uuid4(), name="<b>stray</b>", power_state="running"
    )

    response = superuser_console.get(admin_url("hosts.Host", "change", reported_host.pk))

    html = response.content.decode()
    assert 'data-vm="web-1"' in html
    assert "&lt;b&gt;stray&lt;/b&gt;" in html and "<b>stray</b>" not in html
    domain_row = html[html.index('data-domain="&lt;b&gt;stray&lt;/b&gt;"') :].split("</tr>")[0]
    assert "<td>Running</td>" in domain_row


def test_the_host_page_lists_only_the_vms_the_admin_may_see(
    reported_host, make_vm, cluster_a, staff_with_role, grant
):
    mine = make_vm(cluster_a, host=reported_host, name="mine", status="up")
    make_vm(cluster_a, host=reported_host, name="someone-elses", status="up")
    viewer = staff_with_role(["hosts.view_host"], cluster_a)
    grant(viewer, "UserVmManager", mine)

    response = logged_in(viewer).get(admin_url("hosts.Host", "change", reported_host.pk))

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-vm="mine"' in html
    assert "someone-elses" not in html


def test_a_cluster_admin_sees_neither_hosts_nor_cluster_names_of_another_cluster(
    console_of_a, make_host, cluster_a, cluster_b
):
    make_host(cluster_a, name="host-a")
    make_host(cluster_b, name="host-b")

    response = console_of_a.get(admin_url("hosts.Host", "changelist"))

    html = response.content.decode()
    assert {host.name for host in response.context["cl"].result_list} == {"host-a"}
    assert "cluster-b" not in html  # not even in the cluster filter


# --- maintenance --------------------------------------------------------------------------


def test_put_in_maintenance_takes_the_host_out_of_service_and_says_so(
    superuser_console, reported_host, admin_user
):
    response = run_action(superuser_console, "hosts.Host", "put_in_maintenance", [reported_host])

    assert response.status_code == 200
    reported_host.refresh_from_db()
    assert reported_host.status == "maintenance"
    assert ("success", "Host kvm-1 is in maintenance.") in shown_messages(response)
    event = Event.objects.filter(object_type="host", object_id=reported_host.pk).last()
    assert event.message == "Host kvm-1 is in maintenance"
    assert event.user_id == admin_user.pk


def test_put_in_maintenance_queues_a_migration_for_each_running_vm(
    superuser_console, reported_host, make_vm, cluster_a
):
    up = make_vm(cluster_a, host=reported_host, name="up-1", status="up")
    paused = make_vm(cluster_a, host=reported_host, name="paused-1", status="paused")
    make_vm(cluster_a, host=reported_host, name="down-1", status="down")

    response = run_action(superuser_console, "hosts.Host", "put_in_maintenance", [reported_host])

    migrations = Job.objects.filter(kind=JobKind.MIGRATE)
    assert {job.vm_id for job in migrations} == {up.pk, paused.pk}
    assert all(job.params == {"reason": "maintenance"} for job in migrations)
    assert (
        "success",
        "Host kvm-1 is in maintenance; 2 VM(s) migrating away.",
    ) in shown_messages(response)


def test_a_host_in_maintenance_already_is_refused_with_a_message(
    superuser_console, make_host, cluster_a
):
    host = make_host(cluster_a, name="kvm-9", status="maintenance")

    response = run_action(superuser_console, "hosts.Host", "put_in_maintenance", [host])

    assert response.status_code == 200
    assert ("error", "Host kvm-9 is in maintenance already.") in shown_messages(response)
    assert not Event.objects.filter(object_type="host", object_id=host.pk).exists()


def test_activate_brings_a_host_back_to_connecting_until_it_is_read(
    superuser_console, make_host, cluster_a
):
    host = make_host(cluster_a, name="kvm-3", status="maintenance", status_detail="by root")

    response = run_action(superuser_console, "hosts.Host", "activate", [host])

    host.refresh_from_db()
    assert (host.status, host.status_detail) == ("connecting", "")
    assert (
        "success",
        "Host kvm-3 left maintenance; it is Up once it is read again.",
    ) in shown_messages(response)


def test_activating_a_host_that_is_up_is_refused(superuser_console, reported_host):
    response = run_action(superuser_console, "hosts.Host", "activate", [reported_host])

    reported_host.refresh_from_db()
    assert reported_host.status == "up"
    assert (
        "error",
        "Host kvm-1 is not in maintenance; nothing to activate.",
    ) in shown_messages(response)


def test_a_host_viewer_may_not_put_it_in_maintenance(reported_host, staff_with_role, cluster_a):
    viewer = staff_with_role(["hosts.view_host"], cluster_a)

    response = run_action(logged_in(viewer), "hosts.Host", "put_in_maintenance", [reported_host])

    reported_host.refresh_from_db()
    assert reported_host.status == "up"
    assert "put_in_maintenance" not in response.content.decode()  # not even offered


def test_a_cluster_admin_cannot_put_another_clusters_host_in_maintenance(
    console_of_a, make_host, cluster_a, cluster_b
):
    host_b = make_host(cluster_b, name="host-b", status="up")
    make_host(cluster_a, name="host-a", status="up")

    run_action(console_of_a, "hosts.Host", "put_in_maintenance", [host_b])

    host_b.refresh_from_db()
    assert host_b.status == "up"


def test_a_sync_that_was_reading_the_host_does_not_undo_maintenance(
    superuser_console, reported_host
):
    run_action(superuser_console, "hosts.Host", "put_in_maintenance", [reported_host])
    report = driver.HostReport(cpus=16, memory_mb=3072, cpu_model="test")

    sync.apply_report(reported_host.pk, report)
    sync.mark_unreachable(reported_host.pk, "connection refused")

    reported_host.refresh_from_db()
    assert reported_host.status == "maintenance"


@pytest.mark.django_db(transaction=True)
def test_maintenance_moves_a_running_vm_to_another_host(sim_hosts, running_vm, admin_user):
    vm = running_vm()
    source = vm.host

    run_action(logged_in(admin_user), "hosts.Host", "put_in_maintenance", [source])
    job = Job.objects.get(vm=vm, kind=JobKind.MIGRATE)
    outcome = jobs.run(job.pk, OPERATION_BY_KIND)

    vm.refresh_from_db()
    assert outcome == "succeeded", Job.objects.get(pk=job.pk).error_message
    assert vm.host_id != source.pk and vm.status == "up"
    assert Host.objects.get(pk=source.pk).status == "maintenance"
    assert str(vm.uuid) in {d.uuid for d in driver.host_report(vm.host.uri).domains}
    assert VirtualMachine.objects.filter(host=source, status="up").count() == 0

"""A VM's last day on its pages: CPU, memory, disk and network I/O drawn as described images
with an hourly table, on its portal page for whoever may see it and on its admin page, each read
again every minute (its fragment: a 404 for those who may not see the VM)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts import samples
from hosts.models import VirtualMachine, VmSample
from tests.portal import signed_in
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def sampled_vm(make_vm, cluster_a, make_user, grant):
    """A VM of 1024 MiB held by its owner, with a point a minute for the last day: CPU 25%
    but 75% at the latest minute, 512 MiB used, disk read 2 MiB/s and written 1 MiB/s,
    network 10 KiB/s received and sent unknown."""
    owner = make_user("vm-owner")
    vm = make_vm(cluster_a, name="web-1", memory_mb=1024, owner=owner)
    grant(owner, "UserRole", vm)
    now = samples.minute_of(timezone.now())
    VmSample.objects.bulk_create(
        VmSample(
            vm=vm,
            at=now - timedelta(minutes=m),
            cpu_percent=75.0 if m == 0 else 25.0,
            memory_used_mb=512,
            disk_read_bps=2 * 1024 * 1024,
            disk_write_bps=1024 * 1024,
            net_rx_bps=10 * 1024,
            net_tx_bps=None,
        )
        for m in range(24 * 60)
    )
    return vm


def test_the_vms_portal_page_draws_cpu_memory_disk_and_network(sampled_vm):
    client = signed_in(VirtualMachine.objects.get(pk=sampled_vm.pk).owner)

    html = client.get(f"/vms/{sampled_vm.pk}/").content.decode()

    assert len(re.findall(r'<svg role="img"', html)) == 4
    assert '<title id="cpu-title">VM CPU in use (of its vCPUs), last 24 hours</title>' in html
    assert re.search(r"CPU: now 75%, average 25%, highest 75% at \d\d:\d\d\.", html)
    assert "Memory used: now 512 MiB" in html
    assert "Read: now 2 MiB/s" in html and "Written: now 1 MiB/s" in html
    assert "Received: now 10 KiB/s" in html and "Sent: not measured." in html
    assert f'data-refresh-url="/vms/{sampled_vm.pk}/day-charts/?span=day"' in html


def test_the_text_alternative_lists_the_vms_day_hour_by_hour(sampled_vm):
    client = signed_in(VirtualMachine.objects.get(pk=sampled_vm.pk).owner)

    html = client.get(f"/vms/{sampled_vm.pk}/day-charts/").content.decode()

    table = html[html.index('<div class="visually-hidden">') :]
    assert len(re.findall(r'<th scope="row">\d\d:\d\d</th>', table)) in (24, 25)
    assert "<td>512</td><td>2048</td><td>1024</td><td>10</td><td>—</td>" in table


def test_a_vm_never_read_running_says_so(make_vm, cluster_a, admin_user):
    vm = make_vm(cluster_a, name="new-1")

    html = signed_in(admin_user).get(f"/vms/{vm.pk}/day-charts/").content.decode()

    assert "No figures were recorded in the last 24 hours." in html


def test_reading_a_vms_day_takes_a_bounded_number_of_queries(
    sampled_vm, django_assert_max_num_queries
):
    client = signed_in(VirtualMachine.objects.get(pk=sampled_vm.pk).owner)
    client.get(f"/vms/{sampled_vm.pk}/day-charts/")  # warm: the session, the user

    # the session, the user, the VM through the user's grants, its points
    with django_assert_max_num_queries(4):
        response = client.get(f"/vms/{sampled_vm.pk}/day-charts/")

    assert response.status_code == 200


def test_someone_who_may_not_see_the_vm_gets_no_charts(sampled_vm, make_user):
    stranger = signed_in(make_user("stranger"))

    assert stranger.get(f"/vms/{sampled_vm.pk}/day-charts/").status_code == 404


def test_the_vms_admin_page_draws_its_day_and_reads_it_again(superuser_console, sampled_vm):
    html = superuser_console.get(admin_url("hosts.VirtualMachine", "change", sampled_vm.pk))
    html = html.content.decode()

    assert len(re.findall(r'<svg role="img"', html)) == 4
    assert "Memory used: now 512 MiB" in html
    assert 'src="/static/corral/day_charts.js"' in html
    url = reverse("admin:hosts_virtualmachine_day_charts", args=[sampled_vm.pk])
    assert f'data-refresh-url="{url}?span=day"' in html


def test_the_vms_admin_charts_take_a_bounded_number_of_queries(
    superuser_console, sampled_vm, django_assert_max_num_queries
):
    url = reverse("admin:hosts_virtualmachine_day_charts", args=[sampled_vm.pk])
    superuser_console.get(url)

    with django_assert_max_num_queries(4):
        response = superuser_console.get(url)

    assert response.status_code == 200


def test_an_admin_of_another_cluster_gets_no_charts_of_the_vm(console_of_a, make_vm, cluster_b):
    other = make_vm(cluster_b, name="vm-b")
    url = reverse("admin:hosts_virtualmachine_day_charts", args=[other.pk])

    assert console_of_a.get(url).status_code == 404

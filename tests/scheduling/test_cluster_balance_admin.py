"""The cluster list's balancer dry run: it says what the balancer would move, and moves nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host, Job, VirtualMachine
from scheduling.models import Policy
from tests.conftest import unique
from tests.project.admin.fixtures import run_action, shown_messages


def _host(cluster, name: str, **fields) -> Host:
    return Host.objects.create(
        cluster=cluster,
        name=name,
        uri=f"qemu+ssh://root@{unique('node')}.example.org/system",
        status="up",
        cpus=16,
        memory_mb=3072,
        reported_networks=["default"],
        **fields,
    )


def _vm_on(host: Host, template, name: str, vcpus: int) -> VirtualMachine:
    return VirtualMachine.objects.create(
        cluster=host.cluster,
        template=template,
        name=name,
        host=host,
        status="up",
        vcpus=vcpus,
        memory_mb=256,
        disk_gb=1,
    )


@pytest.fixture
def hot_cluster(make_cluster, make_template):
    """An evenly_distributed cluster whose h1 has run 14 of its 16 CPUs' worth of vCPUs
    (87.5%, over HighUtilization 80) for ten minutes; h2 is idle."""
    cluster = make_cluster(policy=Policy.objects.get(name="evenly_distributed"))
    template = make_template(vcpus=1, memory_mb=128, disk_gb=1)
    h1 = _host(cluster, "h1", overloaded_since=timezone.now() - timedelta(minutes=10))
    _host(cluster, "h2")
    _vm_on(h1, template, "small", vcpus=4)
    _vm_on(h1, template, "large", vcpus=10)
    return cluster


def test_the_dry_run_says_which_vm_would_move_and_queues_no_job(superuser_console, hot_cluster):
    response = run_action(superuser_console, "hosts.Cluster", "balance_dry_run", [hot_cluster])

    assert response.status_code == 200
    assert (
        "info",
        f"{hot_cluster.name}: would move small from h1 to one of h2 (h1 CPU load 88%).",
    ) in shown_messages(response)
    assert not Job.objects.exists()
    assert set(VirtualMachine.objects.values_list("name", "host__name")) == {
        ("small", "h1"),
        ("large", "h1"),
    }


def test_the_dry_run_of_a_cluster_without_a_balancer_says_nothing_would_move(
    superuser_console, make_cluster
):
    quiet = make_cluster(policy=Policy.objects.get(name="none"))

    response = run_action(superuser_console, "hosts.Cluster", "balance_dry_run", [quiet])

    assert response.status_code == 200
    assert (
        "info",
        f"{quiet.name}: nothing to move (the policy has no balancer).",
    ) in shown_messages(response)
    assert not Job.objects.exists()

"""Every admin page the operator screens add or change opens for a superuser and for a
ClusterAdmin of one cluster, and the latter's pages never name what is in another cluster."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from hosts import jobs
from hosts.models import ExternalDomain, JobKind
from project.events import alert
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def place(make_host, make_vm, make_pool, make_template):
    """place(cluster, tag) -> the objects of a cluster whose names all contain ``tag``."""

    def make(cluster, tag: str) -> dict:
        host = make_host(cluster, name=f"host-{tag}", status="up", cpus=8, memory_mb=2048)
        pool = make_pool(cluster, make_template(f"tmpl-{tag}", cluster=cluster), name=f"pool-{tag}")
        vm = make_vm(cluster, pool.template, name=f"vm-{tag}", host=host, pool=pool, status="up")
        job = jobs.submit(JobKind.NOOP, vm=vm)
        ExternalDomain.objects.create(host=host, uuid=uuid.uuid4(), name=f"stray-{tag}")
        alert(
            "vm", vm.pk, f"VM vm-{tag} stopped outside Corral", vm_id=vm.pk, cluster_id=cluster.pk
        )
        return {"cluster": cluster, "host": host, "pool": pool, "vm": vm, "job": job}

    return make


def pages(objects: dict) -> list[str]:
    return [
        reverse("admin:index"),
        reverse("admin:dashboard"),
        admin_url("hosts.Cluster", "changelist"),
        admin_url("hosts.Cluster", "change", objects["cluster"].pk),
        reverse("admin:leases_capacity_timeline", args=[objects["cluster"].pk]),
        admin_url("hosts.Host", "changelist"),
        admin_url("hosts.Host", "change", objects["host"].pk),
        admin_url("hosts.VirtualMachine", "changelist"),
        admin_url("hosts.VirtualMachine", "change", objects["vm"].pk),
        admin_url("pools.VmPool", "changelist"),
        admin_url("pools.VmPool", "change", objects["pool"].pk),
        admin_url("hosts.Job", "changelist"),
        admin_url("hosts.Job", "change", objects["job"].pk),
        admin_url("hosts.ExternalDomain", "changelist"),
        admin_url("project.Event", "changelist"),
        admin_url("scheduling.AffinityGroup", "changelist"),
        admin_url("hosts.Template", "changelist"),
    ]


def test_every_operator_page_opens_for_a_superuser(superuser_console, place, cluster_a, cluster_b):
    place(cluster_b, "b")
    for url in pages(place(cluster_a, "a")):
        response = superuser_console.get(url)
        assert response.status_code == 200, url


def test_every_operator_page_opens_for_a_cluster_admin_without_naming_another_cluster(
    console_of_a, place, cluster_a, cluster_b
):
    place(cluster_b, "b")
    for url in pages(place(cluster_a, "a")):
        response = console_of_a.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        for name in ("cluster-b", "host-b", "vm-b", "pool-b", "tmpl-b", "stray-b"):
            assert name not in html, (url, name)


def test_a_cluster_admin_is_refused_every_page_of_another_clusters_objects(
    console_of_a, place, cluster_a, cluster_b
):
    place(cluster_a, "a")
    objects_b = place(cluster_b, "b")
    for url in pages(objects_b):
        if "/change/" not in url and "capacity" not in url:
            continue
        response = console_of_a.get(url)
        # The admin sends a change page of an object outside the user's reach back to its
        # index ("doesn't exist"); the capacity pages are views of their own: 404.
        assert response.status_code == (404 if "capacity" in url else 302), url
        assert "host-b" not in response.content.decode()

"""The admin console's lists and its dashboard take a fixed number of queries, however many
rows they show: the same bound holds for a few rows and for many."""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from hosts import jobs
from hosts.models import ExternalDomain, JobJournal, JobKind
from project.events import alert
from tests.pools.fixtures import add_pool_vms
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.django_db
_serial = itertools.count(1)

# The most queries a superuser's page may take (session and user included), whatever its rows.
MAX_QUERIES = {
    "hosts.Host": 6,  # count twice, page (usage sub-selects), cluster filter
    "hosts.VirtualMachine": 8,  # + cluster, pool and host filters
    "pools.VmPool": 6,  # counts are sub-selects
    "hosts.Job": 5,
    "project.Event": 6,  # + object type filter
    "hosts.Cluster": 5,
    "hosts.ExternalDomain": 7,
    "dashboard": 9,  # a group each, + a count when more pools or alerts than shown
}
# A ClusterAdmin's pages also ask, once per screen and action, what the admin may do there
# (the menu lists every screen): many more queries, but as many for few rows as for many.
SCOPED_CEILING = 120


@pytest.fixture
def add_rows(
    cluster_a, admin_of_a, grant, make_cluster, make_host, make_template, make_vm, make_pool
):
    """add_rows(page, n): n more rows of what ``page`` lists, in cluster A (or, for clusters,
    in clusters the admin of A also administers), each with its related objects filled in."""
    template = make_template(cluster=cluster_a)

    def user():
        return get_user_model().objects.create(username=f"owner-{next(_serial)}")

    def host():
        return make_host(cluster_a, status="up", cpus=16, memory_mb=3072)

    def vm(**fields):
        return make_vm(cluster_a, template, host=host(), status="up", owner=user(), **fields)

    def pool():
        made = make_pool(cluster_a, template, size=2, prestarted_vms=2)
        add_pool_vms(made, ["up", "down"])
        return made

    def job():
        made = jobs.submit(JobKind.NOOP, vm=vm(), requested_by=user())
        JobJournal.objects.create(job=made, message="step")

    def cluster():
        made = make_cluster()
        grant(admin_of_a, "ClusterAdmin", made)
        make_vm(made, host=make_host(made))

    makers = {
        "hosts.Host": lambda: vm(),
        "hosts.VirtualMachine": lambda: vm(pool=pool()),
        "pools.VmPool": pool,
        "hosts.Job": job,
        "project.Event": lambda: alert("host", 1, "hot", cluster_id=cluster_a.pk),
        "hosts.Cluster": cluster,
        "hosts.ExternalDomain": lambda: ExternalDomain.objects.create(
            host=host(), uuid=uuid.uuid4(), name="stray"
        ),
        "dashboard": lambda: (pool(), job(), alert("host", 1, "hot", cluster_id=cluster_a.pk)),
    }

    def add(page: str, count: int) -> None:
        for _ in range(count):
            makers[page]()

    return add


def page_url(page: str) -> str:
    return reverse("admin:dashboard") if page == "dashboard" else admin_url(page, "changelist")


@pytest.mark.parametrize("page", sorted(MAX_QUERIES))
def test_a_superusers_page_takes_the_same_queries_for_few_and_many_rows(
    page, add_rows, admin_user, django_assert_max_num_queries
):
    console = logged_in(admin_user)
    for added in (2, 10):
        add_rows(page, added)
        with django_assert_max_num_queries(MAX_QUERIES[page]):
            response = console.get(page_url(page))
        assert response.status_code == 200
        if page != "dashboard":
            assert response.context["cl"].result_count >= added


@pytest.mark.parametrize("page", sorted(MAX_QUERIES))
def test_a_cluster_admins_page_takes_no_more_queries_for_many_rows_than_for_few(
    page, add_rows, admin_of_a, django_assert_max_num_queries
):
    console = logged_in(admin_of_a)
    add_rows(page, 2)
    with CaptureQueriesContext(connection) as few:
        console.get(page_url(page))
    assert len(few) <= SCOPED_CEILING
    add_rows(page, 10)

    with django_assert_max_num_queries(len(few) + (2 if page == "dashboard" else 0)):
        response = console.get(page_url(page))

    assert response.status_code == 200
    if page != "dashboard":
        assert response.context["cl"].result_count >= 12

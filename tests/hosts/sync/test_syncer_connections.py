"""A task cluster's syncer keeps its threads' database connections from one host to the next
(``project.loops.reuse_connection``): syncing many hosts many times opens no more connections
than it has threads, whatever ``CONN_MAX_AGE`` says (0 on SQLite), and a connection that broke
is replaced at the next host. Hosts without a VM of Corral's are not read for guest info."""

import threading

import pytest
from django.db import DatabaseError, connection
from django.db.backends.signals import connection_created

from hosts import driver, sync
from hosts.models import Host, VirtualMachine
from hosts.operations import spec_for
from hosts.sync.loop import Syncer
from project import loops
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def opened():
    """The database connections opened (by any thread) while the test runs."""
    seen = []
    lock = threading.Lock()

    def count(sender, connection, **kwargs):
        with lock:
            seen.append(threading.get_ident())

    connection_created.connect(count, weak=False)
    yield seen
    connection_created.disconnect(count)


def test_syncing_hosts_again_and_again_opens_a_connection_per_thread_only(
    light_hosts, settings, opened
):
    settings.CORRAL_SYNC_INTERVAL = 0.2
    settings.CORRAL_SYNC_THREADS = 2
    hosts = light_hosts(6, vms=2)
    syncer = Syncer("connections-test")
    try:
        wait_until(
            lambda: syncer.round() and syncer.syncs >= 5 * len(hosts),
            timeout=30,
            message="the hosts were not synced five times each",
        )
    finally:
        syncer.stop()
    statuses = Host.objects.filter(pk__in=[h.pk for h in hosts]).values_list("status", flat=True)
    assert set(statuses) == {"up"}
    # Its two sync threads (the rounds run on this one): one each, for 30 syncs and more.
    here = threading.get_ident()
    assert len([thread for thread in opened if thread != here]) == 2, opened


def test_a_connection_that_broke_is_replaced_before_the_next_unit_of_work(db):
    def work(results: list) -> None:
        try:
            Host.objects.count()  # this thread's connection, opened
            connection.connection.close()  # the database ended it (a restart, say)
            try:
                Host.objects.count()
            except DatabaseError:
                results.append("failed")
            loops.reuse_connection()
            results.append(Host.objects.count())
        finally:
            connection.close()

    results: list = []
    worker = threading.Thread(target=work, args=(results,))
    worker.start()
    worker.join(timeout=30)
    assert results == ["failed", Host.objects.count()]


def test_only_hosts_with_vms_of_corrals_are_read_for_guest_info(
    light_hosts, make_vm, small_template, settings
):
    settings.CORRAL_SYNC_INTERVAL = 0.2
    empty, busy = light_hosts(2, vms=3)
    vm = make_vm(cluster=busy.cluster, template=small_template)
    driver.define(busy.uri, spec_for(vm))
    driver.start(busy.uri, str(vm.uuid))
    VirtualMachine.objects.filter(pk=vm.pk).update(host=busy)

    assert sync.sync_host(empty.pk).guests == 0
    assert sync.sync_host(busy.pk).guests == 1

    syncer = Syncer("guest-info-hosts-test")
    try:
        wait_until(
            lambda: syncer.round() and syncer.syncs >= 4 and busy.pk in syncer.last_guest_info,
            timeout=30,
            message="the host with a VM was not read for guest info",
        )
        syncer.round()  # each host was found Up before this round: its guests would be due
    finally:
        syncer.stop()
    assert empty.pk not in syncer.last_guest_info

"""The cluster's scheduling lock: one decision at a time, bounded waiting and holding."""

import threading
import time

import pytest
from django.db import close_old_connections, connection

from hosts.host_choice import SchedulerBusy, decision


def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("row locks with timeouts are PostgreSQL's; SQLite serializes all writers")


def test_a_second_decision_waits_for_the_first(transactional_db, make_cluster):
    _postgres_only()
    cluster = make_cluster()
    order = []
    entered = threading.Event()

    def first():
        close_old_connections()
        with decision(cluster.pk):
            order.append("first in")
            entered.set()
            time.sleep(0.5)
            order.append("first out")
        connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    entered.wait(5)
    with decision(cluster.pk):
        order.append("second in")
    thread.join()

    assert order == ["first in", "first out", "second in"]


def test_waiting_for_the_lock_gives_up_with_a_clear_error(transactional_db, make_cluster, settings):
    _postgres_only()
    settings.CORRAL_SCHEDULER_LOCK_TIMEOUT = 0.3
    cluster = make_cluster()
    entered, release = threading.Event(), threading.Event()

    def holder():
        close_old_connections()
        with decision(cluster.pk):
            entered.set()
            release.wait(5)
        connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    entered.wait(5)
    try:
        with pytest.raises(SchedulerBusy, match="busy"), decision(cluster.pk):
            pass
    finally:
        release.set()
        thread.join()


def test_a_holder_that_hangs_loses_the_lock(transactional_db, make_cluster, settings):
    _postgres_only()
    settings.CORRAL_SCHEDULER_LOCK_HOLD_TIMEOUT = 0.5
    settings.CORRAL_SCHEDULER_LOCK_TIMEOUT = 10
    cluster = make_cluster()
    entered = threading.Event()

    def hung_holder():
        close_old_connections()
        try:
            with decision(cluster.pk):
                entered.set()
                time.sleep(10)  # idle in its transaction: the server ends the session
        except Exception:
            pass
        finally:
            connection.close()

    thread = threading.Thread(target=hung_holder)
    thread.start()
    entered.wait(5)
    started = time.monotonic()
    with decision(cluster.pk):
        waited = time.monotonic() - started
    thread.join()

    assert waited < 8  # freed by the hold timeout, long before the holder woke up

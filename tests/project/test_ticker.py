"""The ticker: one runs at a time across every task cluster, and its schedule names it."""

import importlib
import pydoc
import threading

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django_q.models import Schedule

from project.models import LoopLock
from project.ticker import TICKER_LOCK, Ticker, ensure_schedules, tick
from project.workers import task_path
from tests.conftest import wait_until


@pytest.mark.slow
def test_only_one_of_two_concurrent_tickers_works(transactional_db):
    outcomes = {}

    def run_first():
        try:
            outcomes["first"] = Ticker().run(11)
        finally:
            connection.close()

    first = threading.Thread(target=run_first)
    first.start()
    wait_until(lambda: LoopLock.objects.filter(name=TICKER_LOCK).exists(), timeout=10)

    outcomes["second"] = Ticker().run(1)
    first.join(30)

    assert outcomes == {"first": "done", "second": "another ticker runs"}


def test_the_tickers_schedule_runs_the_ticker(db):
    ensure_schedules()

    [schedule] = Schedule.objects.filter(name="corral-ticker")
    assert pydoc.locate(schedule.func) is tick


def test_a_schedule_stored_under_the_tickers_old_path_runs_it_after_the_migration(db):
    """A schedule stored the old way (the ticker in hosts.tasks), then the migration's data step
    as ``migrate`` runs it: the schedule names the ticker where it lives now."""
    step = importlib.import_module("project.migrations.0011_ticker_schedule_path")
    Schedule.objects.update_or_create(name="corral-ticker", defaults={"func": "hosts.tasks.tick"})
    assert pydoc.locate("hosts.tasks.tick") is None  # nothing runs under the old path

    step.to_new_path(apps, None)

    [schedule] = Schedule.objects.filter(name="corral-ticker")
    assert pydoc.locate(schedule.func) is tick
    assert ("project", "0011_ticker_schedule_path") in MigrationRecorder(
        connection
    ).applied_migrations()


def _queued_tickers() -> int:
    from django_q.models import OrmQ

    return sum(1 for task in OrmQ.objects.all() if task.func() == task_path(tick))


def test_a_ticker_whose_holder_died_is_revived_by_a_live_cluster_not_while_one_runs(db):
    """A task cluster killed while it held the ticker breaks the chain: once the lock has
    expired, the next live syncer to ask queues a new ticker (once), and none while a ticker
    holds the lock."""
    from datetime import timedelta

    from django.utils import timezone

    from project.ticker import revive_if_lost

    lock = LoopLock.objects.create(
        name=TICKER_LOCK, holder="gone:1:dead", expires_at=timezone.now() + timedelta(seconds=8)
    )
    assert (revive_if_lost(), _queued_tickers()) == (False, 0)

    LoopLock.objects.filter(pk=lock.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert [revive_if_lost(), revive_if_lost()] == [True, False]
    assert _queued_tickers() == 1

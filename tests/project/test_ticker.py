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

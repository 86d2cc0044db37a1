"""The portal's lease forms with times carrying an offset PostgreSQL refuses (beyond ±15:59):
a datetime-local input sends none, but a hand-made POST may. Each is read as the instant it
names and stored in UTC, as the API does; a time that falls before the year 1 in UTC is a
message at its field, and nothing is stored.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta, timezone

import pytest
from django.test import Client
from django.utils import timezone as django_timezone

from leases.models import Lease
from tests.conftest import stored_rows

pytestmark = pytest.mark.django_db

EAST = timezone(timedelta(hours=23))
WEST = timezone(-timedelta(hours=23, minutes=59))
ZONES = pytest.mark.parametrize("zone", [EAST, WEST], ids=["+23:00", "-23:59"])


@pytest.fixture
def alice(lease_user, make_host):
    make_host(reservable=True, status="up", cpus=16, memory_mb=8192)
    user = lease_user("alice")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def window():
    start = (django_timezone.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    return start, start + timedelta(hours=4)


def form(start: str, end: str, **changes) -> dict:
    return {
        "name": "offsets",
        "start": start,
        "end": end,
        "vcpus": "1",
        "memory_mb": "1024",
        "disk_gb": "10",
        "amount": "1",
        "affinity": "any",
        **changes,
    }


def written(moment, zone) -> str:
    return moment.astimezone(zone).isoformat()


@ZONES
def test_a_lease_asked_with_any_offset_is_stored_in_utc(alice, window, zone):
    start, end = window

    response = alice.post("/leases/new/", form(written(start, zone), written(end, zone)))

    assert response.status_code == 302
    lease = Lease.objects.get(name="offsets")
    assert (lease.start_date, lease.end_date) == (start, end)
    assert response["Location"] == f"/leases/{lease.pk}/"


@ZONES
def test_the_capacity_answer_reads_any_offset(alice, window, zone):
    start, end = window
    before = stored_rows()

    response = alice.post("/leases/check/", form(written(start, zone), written(end, zone)))

    assert response.status_code == 200
    assert 'data-fits="yes"' in response.content.decode()
    assert stored_rows() == before


@ZONES
def test_a_new_end_with_any_offset_is_stored_in_utc(alice, window, zone):
    start, end = window
    alice.post("/leases/new/", form(written(start, zone), written(end, zone)))
    lease = Lease.objects.get(name="offsets")
    new_end = end + timedelta(hours=2)

    response = alice.post(f"/leases/{lease.pk}/end/", {"end": written(new_end, zone)})

    assert response.status_code == 302
    lease.refresh_from_db()
    assert lease.end_date == new_end


def test_a_time_before_the_year_one_in_utc_is_a_message_at_its_field(alice, window):
    before = stored_rows()

    response = alice.post("/leases/new/", form("0001-01-01T00:00+23:00", written(window[1], EAST)))

    assert response.status_code == 200
    page = response.content.decode()
    block = page[page.index('id="field-start"') :]
    messages = re.search(r'<ul class="errorlist"[^>]*>(.*?)</ul>', block, re.S).group(1)
    assert "No such time: it falls before the year 1 in UTC." in html.unescape(messages)
    assert stored_rows() == before

"""Leases in the admin console: their events and reservations named in words, and their dates
in the format the portal shows them in."""

from __future__ import annotations

import re

import pytest

from tests.leases.fixtures import at, instances
from tests.portal import signed_in
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab_week(reservable_hosts, make_lease, lease_user):
    reservable_hosts(1)
    owner = lease_user()
    return make_lease(at(9.5), at(17), instances(1), name="lab-week", owner=owner)


def test_a_leases_page_names_its_events_and_reservations_in_words(superuser_console, lab_week):
    page = superuser_console.get(admin_url("leases.Lease", "change", lab_week.pk))

    html = page.content.decode()
    assert f"Start of lab-week, {at(9.5):%Y-%m-%d} 09:30" in html
    assert f"End of lab-week, {at(17):%Y-%m-%d} 17:00" in html
    assert "Instances of lab-week" in html
    assert "start_lease" not in html and "virtual:instance" not in html


def test_the_admin_console_and_the_portal_show_a_leases_start_alike(superuser_console, lab_week):
    shown = f"{at(9.5):%Y-%m-%d} 09:30"

    listed = superuser_console.get(admin_url("leases.Lease", "changelist")).content.decode()
    mine = signed_in(lab_week.owner).get("/leases/").content.decode()

    assert f'<td class="field-start_date nowrap">{shown}</td>' in listed
    assert re.search(rf"<td[^>]*>{shown}</td>", mine)  # a portal cell (labelled for phones)

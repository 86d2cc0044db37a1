"""A VM's charts over the last day, week or month on its portal page: the day draws its minute
points, the week and the month its hourly points and the last day's minutes averaged per hour,
each line breaking where a day has no point; the page marks the span it draws, its fragment
answers 400 for a span it does not know and 404 for a VM the user may not see."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from hosts import samples
from hosts.models import VirtualMachine
from tests.hosts.spans_data import NO_POINTS_ON, NOW, a_month_of, x_of
from tests.portal import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def month_vm(make_vm, cluster_a, make_user, grant, time_machine):
    """A VM held by its owner, with a month of points (``a_month_of``): CPU 20% in the hourly
    points, 60% in the last day's minutes; the time stands at ``NOW``."""
    time_machine.move_to(NOW, tick=False)
    owner = make_user("vm-owner")
    vm = make_vm(cluster_a, name="web-1", memory_mb=1024, owner=owner)
    grant(owner, "UserRole", vm)
    figures = {"memory_used_mb": 512, "disk_read_bps": 1024, "disk_write_bps": 1024}
    a_month_of(
        samples.VMS_KEPT,
        {"cpu_percent": 20.0, **figures},
        {"cpu_percent": 60.0, **figures},
        vm=vm,
    )
    return VirtualMachine.objects.get(pk=vm.pk)


def charts(vm, span: str = "") -> str:
    query = f"?span={span}" if span else ""
    return signed_in(vm.owner).get(f"/vms/{vm.pk}/day-charts/{query}").content.decode()


def cpu_line(html: str) -> list[tuple[str, str]]:
    """The CPU line's points, each its move ("M": the line starts again) and its x."""
    path = re.search(r'<path class="line a" d="([^"]*)"><title>CPU</title>', html)[1]
    return re.findall(r"([ML])([\d.]+),", path)


def axis_labels(html: str) -> list[str]:
    cpu_chart = html[html.index('aria-labelledby="cpu-title') : html.index("</svg>")]
    return re.findall(r'<text x="[\d.]+" y="116" text-anchor="middle">([^<]*)</text>', cpu_chart)


def table_rows(html: str) -> list[str]:
    return re.findall(r'<th scope="row">([^<]*)</th>', html)


def test_the_day_draws_the_minutes_of_the_last_24_hours_by_the_hour(month_vm):
    html = charts(month_vm)

    line = cpu_line(html)
    assert [move for move, _ in line].count("M") == 1
    assert len(line) == 24 * 60
    assert (line[0][1], line[-1][1]) == (x_of(NOW - timedelta(minutes=1439), 1), "720.0")
    assert axis_labels(html) == ["10:30", "16:30", "22:30", "04:30", "10:30"]
    assert '<title id="cpu-title">VM CPU in use (of its vCPUs), last 24 hours</title>' in html
    assert "web-1&#x27;s figures hour by hour, last 24 hours" in html
    assert len(table_rows(html)) == 25  # 10:00 (from 10:31) to 10:00 today (to 10:30)


def test_the_week_draws_seven_days_of_hours_labelled_by_day(month_vm):
    html = charts(month_vm, "week")

    line = cpu_line(html)
    first_hour = datetime(2027, 1, 6, 11, tzinfo=NOW.tzinfo)  # the first after 10:30
    assert (line[0][1], line[-1][1]) == (x_of(first_hour, 7), x_of(NOW.replace(minute=0), 7))
    assert len(line) == 7 * 24 - 24  # an hour a point, but none on the day without points
    assert axis_labels(html) == ["Thu 7", "Fri 8", "Sat 9", "Sun 10", "Mon 11", "Tue 12", "Wed 13"]
    assert '<title id="cpu-title">VM CPU in use (of its vCPUs), last 7 days</title>' in html
    assert "web-1&#x27;s figures day by day, last 7 days" in html
    assert table_rows(html) == [
        "Wed 6 Jan",
        "Thu 7 Jan",
        "Fri 8 Jan",
        "Sat 9 Jan",
        "Mon 11 Jan",
        "Tue 12 Jan",
        "Wed 13 Jan",
    ]


def test_the_week_averages_the_last_days_minutes_per_hour(month_vm):
    html = charts(month_vm, "week")

    table = html[html.index('<div class="visually-hidden">') :]
    assert re.search(r"Mon 11 Jan</th><td>20%</td>", table)  # its hourly points
    assert re.search(r"Wed 13 Jan</th><td>60%</td>", table)  # the minutes, averaged per hour
    assert re.search(r"CPU: now 60%, average \d+%, highest 60% at \w{3} \d+ Jan, \d\d:00\.", html)


def test_the_month_draws_thirty_days_labelled_by_date(month_vm):
    html = charts(month_vm, "month")

    line = cpu_line(html)
    first_hour = datetime(2026, 12, 14, 11, tzinfo=NOW.tzinfo)
    assert (line[0][1], line[-1][1]) == (x_of(first_hour, 30), x_of(NOW.replace(minute=0), 30))
    assert len(line) == 30 * 24 - 24
    assert axis_labels(html) == ["15 Dec", "20 Dec", "25 Dec", "30 Dec", "4 Jan", "9 Jan"]
    assert '<title id="memory-title">Memory used by the guest, last 30 days</title>' in html
    rows = table_rows(html)
    assert len(rows) == 30  # 14 Dec to 13 Jan, but the day without points
    assert (rows[0], rows[-1]) == ("Mon 14 Dec", "Wed 13 Jan")


def test_a_day_without_points_breaks_the_line(month_vm):
    line = cpu_line(charts(month_vm, "week"))

    starts = [x for move, x in line if move == "M"]
    after_the_gap = datetime.combine(NO_POINTS_ON + timedelta(days=1), NOW.timetz())
    assert starts == [line[0][1], x_of(after_the_gap.replace(hour=0, minute=0), 7)]


def test_a_span_without_points_says_so(make_vm, cluster_a, admin_user):
    vm = make_vm(cluster_a, name="new-1")

    html = signed_in(admin_user).get(f"/vms/{vm.pk}/day-charts/?span=month").content.decode()

    assert "No figures were recorded in the last 30 days." in html


def test_the_page_marks_the_span_it_draws_and_reads_it_again(month_vm):
    html = signed_in(month_vm.owner).get(f"/vms/{month_vm.pk}/?span=week").content.decode()

    assert '<a href="?span=week"' in html
    assert re.search(r'<a href="\?span=week"[^>]*aria-current="true">Last week</a>', html)
    assert html.count('aria-current="true"') == 1
    assert "Last day</a>" in html and "Last month</a>" in html
    assert f'data-refresh-url="/vms/{month_vm.pk}/day-charts/?span=week"' in html
    assert "VM CPU in use (of its vCPUs), last 7 days" in html


def test_a_page_asking_for_an_unknown_span_shows_the_day(month_vm):
    html = signed_in(month_vm.owner).get(f"/vms/{month_vm.pk}/?span=year").content.decode()

    assert re.search(r'<a href="\?span=day"[^>]*aria-current="true">Last day</a>', html)
    assert "VM CPU in use (of its vCPUs), last 24 hours" in html


def test_the_fragment_refuses_an_unknown_span_in_plain_words(month_vm):
    response = signed_in(month_vm.owner).get(f"/vms/{month_vm.pk}/day-charts/?span=year")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == "Unknown span: ask for span=day, span=week or span=month."


def test_someone_who_may_not_see_the_vm_gets_a_404_whatever_the_span(month_vm, make_user):
    stranger = signed_in(make_user("stranger"))

    for span in ("week", "month", "year"):
        url = f"/vms/{month_vm.pk}/day-charts/?span={span}"
        assert stranger.get(url).status_code == 404


def test_a_month_of_a_vm_takes_a_bounded_number_of_queries(month_vm, django_assert_max_num_queries):
    client = signed_in(month_vm.owner)
    url = f"/vms/{month_vm.pk}/day-charts/?span=month"
    client.get(url)  # warm: the session, the user

    # the session, the user, the VM through the user's grants, its hours, its minutes
    with django_assert_max_num_queries(5):
        response = client.get(url)

    assert response.status_code == 200

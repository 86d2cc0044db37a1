"""The admin console in a real browser: an administrator puts a host in maintenance from the
host list, and the dashboard open in another tab shows it without being reloaded."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts.models import Host, HostStatus

pytestmark = pytest.mark.slow

DASHBOARD_REFRESH_MS = 10_000  # the dashboard fetches its figures every 3 s


def hosts_with_status(page, status: str):
    return page.locator(f'dl#hosts-by-status > div[data-status="{status}"] > dd')


def test_an_admin_puts_a_host_in_maintenance_and_the_open_dashboard_shows_it(
    new_page, make_user, make_cluster, make_host
):
    admin = make_user("operator", superuser=True)
    cluster = make_cluster()
    chosen, other = (make_host(cluster, status=HostStatus.UP) for _ in range(2))
    dashboard = new_page()

    dashboard.goto("/admin/")
    expect(dashboard).to_have_url(re.compile(r"/admin/login/\?next=/admin/$"))
    dashboard.get_by_label("Username").fill(admin.username)
    dashboard.get_by_label("Password").fill("pw-Corral-1")
    dashboard.get_by_role("button", name="Log in").click()
    expect(hosts_with_status(dashboard, HostStatus.UP)).to_have_text("2")
    expect(hosts_with_status(dashboard, HostStatus.MAINTENANCE)).to_have_text("0")
    dashboard.evaluate("window.marker = 1")

    hosts = new_page(same_session_as=dashboard)
    hosts.goto("/admin/hosts/host/")
    hosts.locator(f'input[name="_selected_action"][value="{chosen.pk}"]').check()
    hosts.locator('select[name="action"]').select_option("put_in_maintenance")
    hosts.get_by_role("button", name="Go").click()

    expect(hosts.locator("ul.messagelist")).to_contain_text(
        f"Host {chosen.name} is in maintenance."
    )
    expect(hosts.locator("#result_list")).to_contain_text("Maintenance")
    expect(hosts_with_status(dashboard, HostStatus.MAINTENANCE)).to_have_text(
        "1", timeout=DASHBOARD_REFRESH_MS
    )
    expect(hosts_with_status(dashboard, HostStatus.UP)).to_have_text("1")
    assert dashboard.evaluate("window.marker") == 1, "the dashboard was reloaded"
    assert Host.objects.get(pk=other.pk).status == HostStatus.UP


def test_the_pool_list_fits_a_laptop_screen_with_its_type_on_at_most_two_lines(
    page, make_user, make_pool, make_cluster, make_template
):
    admin = make_user("operator", superuser=True)
    cluster = make_cluster("classrooms")
    make_pool(cluster, make_template("lab-small"), name="classroom", type="automatic")
    make_pool(cluster, make_template("lab-large"), name="exam", type="manual")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/admin/login/?next=/admin/pools/vmpool/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill("pw-Corral-1")
    page.get_by_role("button", name="Log in").click()

    headers = page.locator("#result_list thead th")
    expect(headers.first).to_be_visible()
    titles = headers.evaluate_all("cells => cells.map(cell => cell.textContent.trim())")
    column = titles.index("Type") + 1
    type_cells = page.locator(f"#result_list tbody tr > :nth-child({column})")
    expect(type_cells).to_have_count(2)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366
    results = page.locator("#changelist .results")
    assert results.evaluate("box => box.scrollWidth <= box.clientWidth"), "the table scrolls"
    line_height = type_cells.first.evaluate("cell => parseFloat(getComputedStyle(cell).lineHeight)")
    for cell in type_cells.all():
        text_height = cell.evaluate(
            "cell => { const r = document.createRange(); r.selectNodeContents(cell);"
            " return r.getBoundingClientRect().height; }"
        )
        assert text_height <= 2 * line_height + 1, cell.inner_text()

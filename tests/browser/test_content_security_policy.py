"""The Content-Security-Policy in a real browser: Chromium refuses an inline script and an
inline style, the browser tests report such a refusal as a failure, and the admin console and
the API's pages work under the policy (the portal's pages are driven by the other tests, which
fail on any violation too)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from hosts.models import HostStatus
from tests.browser.conftest import PASSWORD, BrowserErrors

pytestmark = pytest.mark.slow

INJECT_INLINE_SCRIPT_AND_STYLE = """() => {
  const script = document.createElement("script");
  script.textContent = "window.inlineScriptRan = true;";
  document.head.append(script);
  const heading = document.querySelector("h1");
  heading.setAttribute("style", "color: rgb(255, 0, 0)");
  return getComputedStyle(heading).color;
}"""


def admin_session(new_page, user):
    page = new_page()
    page.goto("/admin/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#user-tools")).to_contain_text(user.username)
    return page


def test_an_inline_script_and_an_inline_style_are_refused_and_reported_as_failures(
    browser, live_server
):
    # A page of its own, outside the new_page fixture: its violations are this test's subject.
    context = browser.new_context(base_url=live_server.url)
    try:
        watcher = BrowserErrors()
        watcher.watch_context(context)
        page = context.new_page()
        page.goto("/login/")

        color = page.evaluate(INJECT_INLINE_SCRIPT_AND_STYLE)
        for _ in range(100):  # the reports reach the test through Playwright's event loop
            if len(watcher.csp_violations) >= 2:
                break
            page.wait_for_timeout(50)

        assert page.evaluate("window.inlineScriptRan") is None
        assert color != "rgb(255, 0, 0)"
        assert sorted(v["directive"] for v in watcher.csp_violations) == [
            "script-src-elem",
            "style-src-attr",
        ]
        reported = "\n".join(watcher.errors())
        assert "Content-Security-Policy violation: script-src-elem blocked inline" in reported
        assert "Content-Security-Policy violation: style-src-attr blocked inline" in reported
    finally:
        context.close()


def test_the_admin_console_works_under_the_policy(
    new_page, make_user, make_cluster, make_host, make_template
):
    admin = make_user("operator", superuser=True)
    cluster = make_cluster()
    host = make_host(cluster, status=HostStatus.UP, reservable=True, cpus=8, memory_mb=16384)
    make_template()
    page = admin_session(new_page, admin)

    # The dashboard's live script (a static file now) fetches the figures again once connected.
    expect(page.locator("#corral-dashboard")).to_have_attribute(
        "data-refreshed-at", re.compile(".")
    )
    expect(page.locator('#hosts-by-status > div[data-status="up"] dd')).to_have_text("1")

    page.goto("/admin/hosts/host/")
    expect(page.locator('.corral-load[data-resource="memory"] meter')).to_have_count(1)
    page.goto(f"/admin/hosts/host/{host.pk}/change/")
    expect(page.locator("#host-vms")).to_be_visible()

    # A widget built by Django's admin scripts: the two-list selector.
    page.goto("/admin/project/role/add/")
    expect(page.locator(".selector-available")).to_be_visible()

    page.goto(reverse("admin:leases_capacity_timeline", args=[cluster.pk]))
    expect(page.locator("#chart-vcpus")).to_be_visible()
    legend = page.locator(".capacity-legend .reserved")
    expect(legend).to_have_css("background-color", "rgb(65, 118, 144)")


def test_the_api_docs_and_the_browsable_api_work_under_the_policy(new_page, make_user):
    admin = make_user("operator", superuser=True)
    page = admin_session(new_page, admin)

    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Corral API")
    # A tag of operations drawn (a long list is drawn as a virtual one, without its sections).
    expect(page.locator(".opblock-tag").first).to_be_visible()

    page.goto("/api/clusters/")
    expect(page.locator(".content-main h1")).to_have_text("Cluster List")
    expect(page.locator("#filtersModal")).to_be_attached()

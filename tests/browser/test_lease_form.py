"""The new-lease form in a real browser: a refusal said once, with what runs short and a
one-click way to the earliest window that fits; and a form laid out as GOV.UK's (a checkbox
beside its label, plain fieldsets, one "Instances", a start that "Start now" disables, a
summary of errors whose links lead to the fields)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from leases.models import Lease
from tests.browser.conftest import log_in
from tests.leases.fixtures import PER_HOST, at, instances

pytestmark = pytest.mark.slow


def local(moment) -> str:
    """A time as the form's datetime-local inputs show it."""
    return f"{timezone.localtime(moment):%Y-%m-%dT%H:%M}"


@pytest.fixture
def form_page(page, reservable_hosts, lease_user, time_machine):
    time_machine.move_to(at(0))  # the windows below start later today
    reservable_hosts(1)  # room for 3 instances of 1024 MiB
    log_in(page, lease_user())
    page.goto("/leases/new/")
    return page


def _fill(page, name: str, amount: int, start, end) -> None:
    form = page.locator("form#lease-form")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Start", exact=True).fill(local(start))
    form.get_by_label("End").fill(local(end))
    form.get_by_label("Instances").fill(str(amount))


def test_a_refused_lease_says_once_what_is_short_and_offers_the_earliest_window_that_fits(
    form_page, make_lease
):
    page = form_page
    make_lease(at(8), at(13), instances(PER_HOST))  # the host is full until 13:00
    _fill(page, "second", 2, at(9), at(17))

    page.locator("#lease-submit").click()

    refusal = page.locator("#lease-refused")
    expect(refusal).to_have_text(
        f"The lease does not fit: only 0 of 2 instances fit between {at(9):%Y-%m-%d %H:%M} and "
        f"{at(17):%Y-%m-%d %H:%M} (2 instances of 1024 MiB need 2048 MiB free; 0 are free). The "
        f"earliest 8-hour window that fits starts {at(13):%Y-%m-%d %H:%M} (UTC)."
    )
    main = page.locator("main").inner_text()
    assert (main.count("does not fit"), main.count("fit in that window")) == (1, 0)

    page.locator("#use-earliest").click()

    form = page.locator("form#lease-form")
    expect(form.get_by_label("Start", exact=True)).to_have_value(local(at(13)))
    expect(form.get_by_label("End")).to_have_value(local(at(21)))
    expect(form.get_by_label("Name")).to_have_value("second")
    expect(form.get_by_label("Instances")).to_have_value("2")
    expect(page.locator("#capacity-answer")).to_have_attribute("data-fits", "yes")
    page.locator("#lease-submit").click()
    expect(page.locator("#messages")).to_contain_text("Lease second accepted.")
    assert Lease.objects.get(name="second").start_date == at(13)


def test_the_start_now_checkbox_sits_right_before_its_label(form_page):
    box = form_page.locator("#id_start_now").bounding_box()
    label = form_page.locator("label[for=id_start_now]").bounding_box()

    gap = label["x"] - (box["x"] + box["width"])
    middles = (box["y"] + box["height"] / 2, label["y"] + label["height"] / 2)
    assert 0 <= gap <= 12, gap
    assert abs(middles[0] - middles[1]) <= 4, middles


def test_fieldsets_have_no_browser_border(form_page):
    styles = form_page.locator("#lease-form fieldset").evaluate_all(
        "sets => sets.map(set => getComputedStyle(set).borderTopStyle)"
    )

    assert styles == ["none", "none"]


def test_instances_is_named_once_on_the_form(form_page):
    names = form_page.locator("#lease-form").locator("label, legend")

    expect(names.filter(has_text=re.compile(r"^\s*Instances\s*$"))).to_have_count(1)
    expect(form_page.get_by_label("Instances", exact=True)).to_have_attribute("type", "number")


def test_start_now_disables_the_start_and_unticking_it_enables_it_again(form_page):
    start = form_page.locator("form#lease-form").get_by_label("Start", exact=True)
    expect(start).to_be_enabled()

    form_page.get_by_label("Start now").check()
    expect(start).to_be_disabled()

    form_page.get_by_label("Start now").uncheck()
    expect(start).to_be_enabled()


def test_errors_are_summed_up_at_the_top_with_links_to_their_fields(form_page):
    page = form_page
    page.locator("form#lease-form").get_by_label("Name").fill("")

    page.locator("#lease-submit").click()

    summary = page.locator("#error-summary")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("heading")).to_have_text("There is a problem")
    expect(page.locator("#field-name .errorlist")).to_have_text("This field is required.")
    summary.get_by_role("link", name="Name: This field is required.").click()
    expect(page.locator("#id_name")).to_be_focused()
    label, field = (page.locator(s).bounding_box() for s in ("label[for=id_name]", "#id_name"))
    assert label["y"] + label["height"] <= field["y"]  # the label above its input


def test_after_bad_input_the_form_still_says_whether_the_lease_fits(form_page):
    page = form_page
    _fill(page, "", 2, at(9), at(17))  # the name left out
    expect(page.locator("#capacity-answer")).to_have_attribute("data-fits", "yes")

    page.locator("#lease-submit").click()

    expect(page.locator("#field-name .errorlist")).to_have_text("This field is required.")
    answer = page.locator("#capacity-answer")
    expect(answer).to_have_attribute("data-fits", "yes")
    expect(answer).to_have_text("Fits: 2 of 2 instances.")

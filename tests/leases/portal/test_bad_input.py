"""The portal under bad input: every form and fragment, fed wrong types, huge values, zero and
negative sizes, impossible windows, markup and null characters.

Each answer is a 4xx or the form again with a message next to the field at fault; nothing is
stored (leases, reservations, allocations, VMs, jobs, grants and log-in state are compared
before and after); markup a user typed is shown escaped wherever it is echoed; and no request
is a server error. Through Django's test client on the real database.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from guardian.models import UserObjectPermission

from hosts.models import Cluster, Host, Job, JobKind, JobState, Template, VirtualMachine
from hosts.views import OPERATION_KINDS
from leases import lifecycle
from leases import services as lease_services
from leases.models import Allocation, Lease, LeaseEvent, LeaseStatus, Reservation
from pools.models import VmPool
from project import events
from project.models import LoginFailure
from tests.conftest import unique

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
# What must never reach a page raw, whatever was cut from the end of an echoed value.
RAW_MARKUP = ("<script>alert(", "<img src=x")
HUGE = str(10**30)
NOT_A_NUMBER = "1e308"
LONG = "x" * 10_000
NULL = "Null characters are not allowed."


def local(moment) -> str:
    """What a datetime-local input sends for ``moment``."""
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def soon(**delta) -> str:
    return local(timezone.now() + timedelta(**delta))


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class Portal:
    """A portal user with a pool VM, an active lease with one VM launched into it, and a
    pending lease; plus someone else's lease."""

    user: User
    client: Client
    cluster: Cluster
    host: Host
    template: Template
    pool: VmPool
    pool_vm: VirtualMachine
    lease: Lease
    lease_vm: VirtualMachine
    pending: Lease
    others_lease: Lease


@pytest.fixture
def portal(make_user, grant) -> Portal:
    cluster = Cluster.objects.create(name=unique("bad-cluster"))
    host = Host.objects.create(
        cluster=cluster,
        name=unique("bad-host"),
        uri=f"qemu+ssh://root@{unique('bad-node')}.example.org/system",
        status="up",
        cpus=16,
        memory_mb=8192,
        reservable=True,
    )
    template = Template.objects.create(
        name=unique("small"), cluster=None, vcpus=1, memory_mb=128, disk_gb=1
    )
    pool = VmPool.objects.create(
        name=unique("bad-pool"), cluster=cluster, template=template, size=2, max_user_vms=1
    )
    pool_vms = [
        VirtualMachine.objects.create(
            name=pool.vm_name(index),
            cluster=cluster,
            template=template,
            pool=pool,
            pool_index=index,
            vcpus=1,
            memory_mb=128,
            disk_gb=1,
        )
        for index in (1, 2)
    ]
    user = make_user(unique("portal-user"))
    grant(user, "UserRole", pool)
    grant(user, "LeaseUser")
    pool_vm = pool_vms[0]
    pool_vm.owner = user
    pool_vm.save(update_fields=["owner"])
    grant(user, "UserRole", pool_vm)
    request = {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 2}
    now = timezone.now()
    lease = lease_services.create_lease(
        owner=user, name="lab", start=now, end=now + timedelta(hours=4), reservations=[request]
    )
    pending = lease_services.create_lease(
        owner=user,
        name="later",
        start=now + timedelta(days=1),
        end=now + timedelta(days=1, hours=4),
        reservations=[request],
    )
    others_lease = lease_services.create_lease(
        owner=make_user(unique("someone")),
        name="theirs",
        start=now + timedelta(days=2),
        end=now + timedelta(days=2, hours=1),
        reservations=[request],
    )
    lifecycle.run_due_events()
    lease.refresh_from_db()
    assert lease.status == LeaseStatus.ACTIVE
    launched = client_of(user).post(
        f"/leases/{lease.pk}/launch/",
        {"reservation": lease.reservations.get().pk, "template": template.pk, "name": "lab-1"},
    )
    assert launched.status_code == 302
    return Portal(
        user=user,
        client=client_of(user),
        cluster=cluster,
        host=host,
        template=template,
        pool=pool,
        pool_vm=pool_vm,
        lease=lease,
        lease_vm=VirtualMachine.objects.get(name="lab-1"),
        pending=pending,
        others_lease=others_lease,
    )


def stored() -> dict:
    """Everything a portal form could write."""
    return {
        "leases": list(
            Lease.objects.order_by("pk").values_list(
                "pk", "name", "status", "start_date", "end_date", "before_end_date", "owner_id"
            )
        ),
        "reservations": list(
            Reservation.objects.order_by("pk").values_list(
                "pk", "lease_id", "status", "amount", "vcpus", "memory_mb", "disk_gb"
            )
        ),
        "allocations": list(
            Allocation.objects.order_by("pk").values_list(
                "pk", "reservation_id", "host_id", "slots"
            )
        ),
        "lease events": list(
            LeaseEvent.objects.order_by("pk").values_list("pk", "event_type", "time", "status")
        ),
        "vms": list(
            VirtualMachine.objects.order_by("pk").values_list(
                "pk", "name", "status", "owner_id", "pool_id", "reservation_id"
            )
        ),
        "jobs": list(Job.objects.order_by("pk").values_list("pk", "kind", "state", "vm_id")),
        "grants": UserObjectPermission.objects.count(),
    }


def field_block(page: str, field: str) -> str:
    """The messages shown under a form field, whose block is marked as in error."""
    start = page.index(f'id="field-{field}"')
    opening = page.rindex("<div", 0, start)
    assert "field-error" in page[opening:start], f"{field} is not marked as in error"
    block = page[opening : page.index("</div>", start)]
    messages = re.search(r'<ul class="errorlist"[^>]*>(.*?)</ul>', block, re.S)
    assert messages, f"no message under {field}"
    return html.unescape(messages.group(1))


def assert_no_raw_markup(page: str, typed=()) -> None:
    """No markup reaches the page raw; what was typed with markup is echoed escaped."""
    for raw in RAW_MARKUP:
        assert raw not in page
    for value in typed:
        if value in (SCRIPT, IMG):
            assert html.escape(value) in page, f"{value} is not echoed escaped"


def each(cases: dict, check) -> None:
    """Run ``check(*case)`` for every case and fail naming every case that went wrong (a server
    error included), not only the first: one database set-up serves a whole table of cases."""
    wrong = []
    for name, case in cases.items():
        try:
            check(*case)
        except Exception as failed:
            wrong.append(f"{name}: {type(failed).__name__}: {failed}"[:600])
    assert not wrong, f"{len(wrong)} of {len(cases)} cases went wrong:\n" + "\n".join(wrong)


# -- the lease form ---------------------------------------------------------------------------


def lease_fields(**changes) -> dict:
    fields = {
        "name": "week",
        "start": soon(days=3),
        "end": soon(days=3, hours=8),
        "vcpus": "1",
        "memory_mb": "128",
        "disk_gb": "1",
        "amount": "1",
        "affinity": "any",
    }
    fields.update(changes)
    return {name: value for name, value in fields.items() if value is not None}


WHOLE = "Enter a whole number."
AT_LEAST_ONE = "greater than or equal to 1."
DATE = "Enter a valid date/time."
TOO_LATE = "Pick a time before the year 9999."

BAD_LEASES = {
    # wrong types
    "text for vCPUs": ({"vcpus": "two"}, "vcpus", WHOLE),
    "a fraction of an instance": ({"amount": "1.5"}, "amount", WHOLE),
    "exponent for memory": ({"memory_mb": NOT_A_NUMBER}, "memory_mb", WHOLE),
    "markup for disk": ({"disk_gb": SCRIPT}, "disk_gb", WHOLE),
    "null in a number": ({"amount": "1\x00"}, "amount", WHOLE),
    "null after the start": ({"start": soon(days=3) + "\x00"}, "start", NULL),
    "null after the end": ({"end": soon(days=3, hours=8) + "\x00"}, "end", NULL),
    "a word for the start": ({"start": "tomorrow"}, "start", DATE),
    "an impossible date": ({"end": "2031-13-45T25:61"}, "end", DATE),
    "February 30": ({"end": "2031-02-30T10:00"}, "end", DATE),
    "a number for the end": ({"end": NOT_A_NUMBER}, "end", DATE),
    "markup for the end": ({"end": IMG}, "end", DATE),
    "year zero": ({"start": "0000-01-01T00:00"}, "start", DATE),
    "a year past 9999": ({"end": "10000-01-01T00:00"}, "end", DATE),
    "a long date": ({"end": "2031-01-01T00:00" + "0" * 5000}, "end", DATE),
    "unknown placement": ({"affinity": SCRIPT}, "affinity", "Select a valid choice."),
    # huge values
    "huge amount": ({"amount": HUGE}, "amount", "less than or equal to 10000."),
    "huge vCPUs": ({"vcpus": HUGE}, "vcpus", "less than or equal to 512."),
    "huge memory": ({"memory_mb": HUGE}, "memory_mb", "less than or equal to"),
    "huge disk": ({"disk_gb": HUGE}, "disk_gb", "less than or equal to"),
    "a number with 5000 digits": ({"amount": "9" * 5000}, "amount", WHOLE),
    "a long name": ({"name": LONG}, "name", "at most 80 characters (it has 10000)."),
    # zero and negative sizes and amounts
    "no instances": ({"amount": "0"}, "amount", AT_LEAST_ONE),
    "negative instances": ({"amount": "-3"}, "amount", AT_LEAST_ONE),
    "zero vCPUs": ({"vcpus": "0"}, "vcpus", AT_LEAST_ONE),
    "negative vCPUs": ({"vcpus": "-1"}, "vcpus", AT_LEAST_ONE),
    "zero memory": ({"memory_mb": "0"}, "memory_mb", "greater than or equal to 16."),
    "negative disk": ({"disk_gb": "-10"}, "disk_gb", AT_LEAST_ONE),
    # windows
    "end before start": ({"end": soon(days=2)}, "end", "The lease must end after it starts."),
    "end at the start": ({"end": soon(days=3)}, "end", "The lease must end after it starts."),
    "start in the past": ({"start": soon(days=-1)}, "start", "The start is in the past"),
    "start in year one": ({"start": "0001-01-01T00:00"}, "start", "The start is in the past"),
    "end in the past": (
        {"start": None, "start_now": "on", "end": soon(hours=-2)},
        "end",
        "The lease must end after it starts.",
    ),
    "ten years long": ({"end": soon(days=3653)}, "end", "A lease may last at most 31 days."),
    "end in year 9999": ({"end": "9999-12-31T23:59"}, "end", TOO_LATE),
    "start in year 9999": ({"start": "9999-12-31T20:00"}, "start", TOO_LATE),
    "no start": ({"start": None}, "start", "Pick a start, or tick “Start now”."),
    "no end": ({"end": None}, "end", "This field is required."),
    # names
    "null in the name": ({"name": "week\x00"}, "name", NULL),
    "no name": ({"name": ""}, "name", "This field is required."),
}


def test_a_bad_lease_form_comes_back_with_the_message_at_its_field_and_nothing_stored(portal):
    def check(changes, field, message):
        before = stored()

        response = portal.client.post("/leases/new/", lease_fields(**changes))

        assert response.status_code == 200
        page = response.content.decode()
        assert message in field_block(page, field)
        assert list(response.context["form"].errors) == [field]
        assert 'id="lease-form"' in page
        assert_no_raw_markup(page, typed=changes.values())
        assert stored() == before

    each(BAD_LEASES, check)


def test_a_refused_lease_shows_the_name_typed_as_text(portal):
    def check(name):
        before = stored()

        response = portal.client.post("/leases/new/", lease_fields(name=name, amount="0"))

        page = response.content.decode()
        assert AT_LEAST_ONE in field_block(page, "amount")
        assert_no_raw_markup(page)
        assert f'value="{html.escape(name)}"' in page
        assert stored() == before

    each({"script": (SCRIPT,), "image": (IMG,)}, check)


def test_an_empty_lease_form_asks_for_every_field_and_stores_nothing(portal):
    before = stored()

    response = portal.client.post("/leases/new/", {})

    page = response.content.decode()
    for field in ("name", "end", "vcpus", "memory_mb", "disk_gb", "amount", "affinity"):
        assert "This field is required." in field_block(page, field)
    assert stored() == before


def test_a_lease_larger_than_the_free_capacity_is_refused_in_words(portal):
    before = stored()

    response = portal.client.post("/leases/new/", lease_fields(amount="10000", memory_mb="8192"))

    page = html.unescape(response.content.decode())
    assert response.status_code == 200
    refusal = page[page.index('id="lease-refused"') :].split("</ul>")[0]
    assert "The lease does not fit: only 1 of 10000 instances fit between" in refusal
    assert stored() == before


def test_a_new_lease_form_prefilled_with_nonsense_shows_it_as_typed_and_stores_nothing(portal):
    before = stored()
    query = {"name": SCRIPT, "start": "soon", "amount": "many", "group": "nobody's", "x": "1"}

    response = portal.client.get("/leases/new/", query)

    page = response.content.decode()
    assert response.status_code == 200
    assert SCRIPT not in page
    assert 'value="soon"' in page and 'value="many"' in page
    assert stored() == before


def test_a_lease_named_with_markup_is_shown_as_text_on_every_page(portal):
    client = portal.client
    response = client.post(
        "/leases/new/", lease_fields(name=SCRIPT, start=None, start_now="on"), follow=True
    )
    lease = Lease.objects.get(name=SCRIPT)
    lifecycle.run_due_events()
    reservation = lease.reservations.get()
    launched = client.post(
        f"/leases/{lease.pk}/launch/",
        {"reservation": reservation.pk, "template": portal.template.pk, "name": "marked-1"},
    )
    vm = VirtualMachine.objects.get(name="marked-1")

    pages = {
        "accepted": response,
        "list": client.get("/leases/"),
        "list fragment": client.get("/leases/list/"),
        "lease": client.get(f"/leases/{lease.pk}/"),
        "lease panel": client.get(f"/leases/{lease.pk}/panel/"),
        "confirm delete": client.get(f"/leases/{lease.pk}/delete/"),
        "launched": client.get(launched.url),
        "my VMs": client.get("/vms/"),
        "VM rows": client.get("/vms/rows/"),
        "VM panel": client.get(f"/vms/{vm.pk}/panel/"),
    }
    for name, page in pages.items():
        assert page.status_code == 200, name
        text = page.content.decode()
        assert_no_raw_markup(text)
        if name != "lease panel":  # the panel does not repeat the name
            assert "&lt;script&gt;alert(1)" in text, name


# -- the capacity answer (an htmx fragment of the lease form) ---------------------------------


def capacity(response) -> tuple[str, str]:
    page = response.content.decode()
    fits = re.search(r'id="capacity-answer" data-fits="(\w+)"', page).group(1)
    return fits, html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


@pytest.mark.parametrize("method", ["get", "post"])
def test_the_capacity_answer_to_a_bad_form_names_the_field_and_reserves_nothing(portal, method):
    def check(changes, field, message):
        before = stored()

        response = getattr(portal.client, method)("/leases/check/", lease_fields(**changes))

        # A form still being typed is an answer, not an error: htmx swaps only 2xx answers in.
        assert response.status_code == 200
        fits, text = capacity(response)
        assert fits == "unknown"
        label = response.context["form"].fields[field].label
        assert message in text.split(f" {label}: ", 1)[1]
        assert_no_raw_markup(response.content.decode())
        assert stored() == before

    # The capacity answer does not need a name.
    each({name: case for name, case in BAD_LEASES.items() if name != "no name"}, check)


def test_the_capacity_answer_shows_a_bad_placement_typed_as_text(portal):
    response = portal.client.post("/leases/check/", lease_fields(affinity=IMG))

    page = response.content.decode()
    assert_no_raw_markup(page)
    assert html.escape(IMG) in page


def test_the_capacity_answer_to_a_lease_that_cannot_fit_says_so(portal):
    before = stored()

    fits, text = capacity(
        portal.client.post("/leases/check/", lease_fields(amount="10000", vcpus="512"))
    )

    assert fits == "no"
    assert "Nothing fits in that window: 0 of 10000 instances." in text
    assert stored() == before


# -- the end of the calendar -----------------------------------------------------------------

ZONES = ["UTC", "America/New_York", "Asia/Tokyo"]


@pytest.mark.parametrize("zone", ZONES)
def test_a_window_at_the_end_of_the_calendar_is_refused_in_every_time_zone(portal, settings, zone):
    settings.TIME_ZONE = zone
    window = lease_fields(start="9999-12-31T20:00", end="9999-12-31T23:00")
    before = stored()

    created = portal.client.post("/leases/new/", window)
    checked = portal.client.post("/leases/check/", window)

    page = created.content.decode()
    assert TOO_LATE in field_block(page, "start")
    assert TOO_LATE in field_block(page, "end")
    assert capacity(checked)[0] == "unknown"
    assert f"Start: {TOO_LATE}" in capacity(checked)[1]
    assert stored() == before
    assert portal.client.get("/leases/").status_code == 200


@pytest.mark.parametrize("zone", ZONES)
def test_a_lease_in_the_last_year_allowed_is_listed_with_the_others(portal, settings, zone):
    settings.TIME_ZONE = zone
    window = lease_fields(name="far", start="9998-12-01T00:00", end="9998-12-31T23:00")

    created = portal.client.post("/leases/new/", window)

    assert created.status_code == 302
    for url in ("/leases/", "/leases/list/", created.url):
        page = portal.client.get(url)
        assert page.status_code == 200, url
    listed = portal.client.get("/leases/").content.decode()
    assert re.findall(r'<tr data-lease="([^"]*)"', listed) == ["lab", "later", "far"]
    assert 'data-bar="far"' in listed


def test_the_api_refuses_times_it_cannot_show_with_a_field_message(portal, client_for):
    client = client_for(portal.user)
    reservation = {"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 128, "amount": 1}
    cases = {
        "2031-02-30T10:00:00+02:00": "Use 'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time.",
        "2031-02-30 10:00": "Use 'now', 'YYYY-MM-DD HH:MM' (UTC) or an ISO 8601 time.",
        "9999-12-31T23:00:00Z": TOO_LATE,
        "9999-12-31 23:00": TOO_LATE,
    }
    before = stored()

    for end, message in cases.items():
        body = {"name": "api", "start_date": "now", "end_date": end, "reservations": [reservation]}
        response = client.post("/api/leases/", body, format="json")

        assert response.status_code == 400, end
        assert response.json() == {"end_date": [message]}, end
        changed = client.put(f"/api/leases/{portal.pending.pk}/", {"end_date": end}, format="json")
        assert changed.status_code == 400, end
    assert stored() == before


# -- changing a lease's end -------------------------------------------------------------------

BAD_ENDS = {
    "empty": ("", "This field is required."),
    "a word": ("someday", DATE),
    "a number": (NOT_A_NUMBER, DATE),
    "huge": (HUGE, DATE),
    "markup": (SCRIPT, DATE),
    "null after a good end": ("null", NULL),
    "a year past 9999": ("10000-01-01T00:00", DATE),
    "in the past": ("past", "The lease must end in the future."),
    "in year one": ("0001-01-01T00:00", "The lease must end in the future."),
    "before the start": ("before start", "The lease must end after it starts."),
    "February 30": ("2031-02-30T10:00", DATE),
    "in year 9999": ("9999-12-31T23:59", TOO_LATE),
    "longer than allowed": ("far", "A lease may last at most 31 days."),
}


@pytest.mark.parametrize("which", ["lease", "pending"])
def test_a_bad_new_end_comes_back_with_the_message_at_the_field_and_nothing_changes(portal, which):
    lease = getattr(portal, which)
    named = {
        "past": soon(hours=-1),
        "null": local(lease.end_date + timedelta(hours=1)) + "\x00",
        "before start": local(lease.start_date - timedelta(hours=1)),
        "far": local(lease.start_date + timedelta(days=40)),
    }

    def check(end, message):
        before = stored()

        response = portal.client.post(f"/leases/{lease.pk}/end/", {"end": named.get(end, end)})

        assert response.status_code == 200
        page = response.content.decode()
        assert message in field_block(page, "end")
        assert_no_raw_markup(page, typed=[end])
        assert stored() == before

    cases = dict(BAD_ENDS)
    if which == "lease":
        # An active lease started in the past: an end before its start is an end in the past.
        cases["before the start"] = ("before start", "The lease must end in the future.")
    each(cases, check)


def test_a_bad_new_end_is_shown_as_text(portal):
    response = portal.client.post(f"/leases/{portal.lease.pk}/end/", {"end": IMG})

    page = response.content.decode()
    assert_no_raw_markup(page)
    assert f'value="{html.escape(IMG)}"' in page


# -- launching a VM into a reservation --------------------------------------------------------

CHOICE = "Select a valid choice. That choice is not one of the available choices."
NAME_RULE = "Use letters, digits, '.', '_' and '-', starting with a letter or digit"

BAD_LAUNCHES = {
    "text for the reservation": ({"reservation": "first"}, "reservation", CHOICE),
    "huge reservation": ({"reservation": HUGE}, "reservation", CHOICE),
    "negative reservation": ({"reservation": "-1"}, "reservation", CHOICE),
    "exponent reservation": ({"reservation": NOT_A_NUMBER}, "reservation", CHOICE),
    "null reservation": ({"reservation": "1\x00"}, "reservation", NULL),
    "a pending lease's reservation": ({"reservation": "pending"}, "reservation", CHOICE),
    "someone else's reservation": ({"reservation": "theirs"}, "reservation", CHOICE),
    "no reservation": ({"reservation": ""}, "reservation", "This field is required."),
    "text for the template": ({"template": "small"}, "template", CHOICE),
    "huge template": ({"template": HUGE}, "template", CHOICE),
    "zero template": ({"template": "0"}, "template", CHOICE),
    "markup template": ({"template": SCRIPT}, "template", CHOICE),
    # A template the user may use that does not fit: refused with the API's reason.
    "a template too large": ({"template": "large"}, "template", "holds 1 vCPU per instance"),
    "markup name": ({"name": SCRIPT}, "name", NAME_RULE),
    "image markup name": ({"name": IMG}, "name", NAME_RULE),
    "null in the name": ({"name": "vm\x00"}, "name", NULL),
    "long name": ({"name": LONG}, "name", "at most 64 characters (it has 10000)."),
    "no name": ({"name": ""}, "name", "This field is required."),
    "a name taken in the cluster": ({"name": "lab-1"}, "name", "already"),
}


def test_a_bad_launch_comes_back_with_the_message_at_its_field_and_nothing_starts(
    portal, make_template
):
    named = {
        "pending": portal.pending.reservations.get().pk,
        "theirs": portal.others_lease.reservations.get().pk,
        "large": make_template(cluster=None, vcpus=4, memory_mb=4096).pk,
    }

    def check(changes, field, message):
        fields = {
            "reservation": portal.lease.reservations.get().pk,
            "template": portal.template.pk,
            "name": "lab-2",
        }
        fields.update({key: named.get(value, value) for key, value in changes.items()})
        before = stored()

        response = portal.client.post(f"/leases/{portal.lease.pk}/launch/", fields)

        assert response.status_code == 200
        page = response.content.decode()
        assert message in field_block(page, field)
        assert list(response.context["launch_form"].errors) == [field]
        # The name is echoed in its input; a refused choice is not repeated.
        assert_no_raw_markup(page, typed=[changes.get("name")])
        assert stored() == before

    each(BAD_LAUNCHES, check)


def test_a_refused_launch_shows_the_name_typed_as_text(portal):
    response = portal.client.post(
        f"/leases/{portal.lease.pk}/launch/",
        {"reservation": portal.lease.reservations.get().pk, "template": "", "name": IMG},
    )

    page = response.content.decode()
    assert_no_raw_markup(page)
    assert f'value="{html.escape(IMG)}"' in page


def test_nothing_launches_into_a_lease_that_has_not_started(portal):
    before = stored()

    response = portal.client.post(
        f"/leases/{portal.pending.pk}/launch/",
        {
            "reservation": portal.pending.reservations.get().pk,
            "template": portal.template.pk,
            "name": "early-1",
        },
    )

    assert response.status_code == 200
    assert CHOICE in field_block(response.content.decode(), "reservation")
    assert stored() == before


# -- VM actions, taking, returning and deleting: the object is in the URL ---------------------

NOT_FOUND_POSTS = {
    "take from a huge pool id": "/pools/{huge}/take/",
    "take from an unknown pool": "/pools/0/take/",
    "operate a huge VM id": "/vms/{huge}/start/",
    "operate someone else's VM": "/vms/{other_vm}/start/",
    "an unknown operation": "/vms/{vm}/explode/",
    "an operation in capitals": "/vms/{vm}/START/",
    "markup for an operation": "/vms/{vm}/%3Cscript%3Ealert(1)%3C%2Fscript%3E/",
    "a null operation": "/vms/{vm}/start%00/",
    "a long operation": "/vms/{vm}/" + "start" * 2000 + "/",
    "return a huge VM id": "/vms/{huge}/return/",
    "return someone else's VM": "/vms/{other_vm}/return/",
    "end a huge lease id": "/leases/{huge}/end/",
    "launch into a huge lease id": "/leases/{huge}/launch/",
    "launch into someone else's lease": "/leases/{theirs}/launch/",
    "delete a huge lease id": "/leases/{huge}/delete/",
    "delete someone else's lease": "/leases/{theirs}/delete/",
    **{
        f"{operation} someone else's VM": f"/vms/{{other_vm}}/{operation}/"
        for operation in sorted(OPERATION_KINDS)
    },
}


def url_for(template: str, portal: Portal) -> str:
    return template.format(
        huge=HUGE,
        vm=portal.pool_vm.pk,
        other_vm=VirtualMachine.objects.get(pool=portal.pool, owner__isnull=True).pk,
        theirs=portal.others_lease.pk,
    )


def test_a_post_to_what_is_not_there_or_not_yours_is_a_404_and_changes_nothing(portal):
    def check(url):
        before = stored()

        response = portal.client.post(
            url_for(url, portal), {"end": soon(hours=8), "name": "x-1", "template": "1"}
        )

        assert response.status_code == 404
        page = response.content.decode()
        assert "Not found" in page
        assert_no_raw_markup(page)
        assert stored() == before

    each({name: (url,) for name, url in NOT_FOUND_POSTS.items()}, check)


FRAGMENTS_NOT_FOUND = {
    "VM page": "/vms/{huge}/",
    "VM panel": "/vms/{huge}/panel/",
    "someone else's VM panel": "/vms/{other_vm}/panel/",
    "job progress": "/jobs/{huge}/",
    "lease page": "/leases/{huge}/",
    "lease panel": "/leases/{huge}/panel/",
    "someone else's lease panel": "/leases/{theirs}/panel/",
    "delete confirmation": "/leases/{huge}/delete/",
    "launch templates": "/leases/{huge}/launch/templates/",
    "someone else's launch templates": "/leases/{theirs}/launch/templates/",
}


def test_a_page_or_fragment_of_what_is_not_there_or_not_yours_is_a_404(portal):
    def check(url):
        response = portal.client.get(url_for(url, portal), HTTP_HX_REQUEST="true")

        assert response.status_code == 404

    each({name: (url,) for name, url in FRAGMENTS_NOT_FOUND.items()}, check)


def test_a_job_of_someone_elses_vm_is_a_404(portal):
    other_vm = VirtualMachine.objects.get(pool=portal.pool, owner__isnull=True)
    job = Job.objects.create(kind=JobKind.START, vm=other_vm, target_name=other_vm.name)

    assert portal.client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").status_code == 404


@pytest.mark.parametrize("reservation", ["", "0", HUGE, NOT_A_NUMBER, SCRIPT, "1\x00", "²"])
def test_templates_for_a_reservation_not_offered_are_those_of_the_first_offered(
    portal, reservation
):
    url = f"/leases/{portal.lease.pk}/launch/templates/"

    response = portal.client.get(url, {"reservation": reservation}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("<option") == 1 and "small-" in page
    assert_no_raw_markup(page)


WRONG_METHODS = [
    ("get", "/pools/{pool}/take/"),
    ("get", "/vms/{vm}/start/"),
    ("get", "/vms/{vm}/return/"),
    ("get", "/leases/{lease}/end/"),
    ("get", "/leases/{lease}/launch/"),
    ("post", "/leases/{lease}/launch/templates/"),
    ("put", "/leases/new/"),
    ("delete", "/leases/{lease}/delete/"),
    ("post", "/vms/{vm}/panel/"),
    ("post", "/jobs/1/"),
    ("post", "/leases/list/"),
]


def test_the_wrong_method_is_a_405_and_changes_nothing(portal):
    def check(method, url):
        before = stored()

        response = getattr(portal.client, method)(
            url.format(pool=portal.pool.pk, vm=portal.pool_vm.pk, lease=portal.lease.pk)
        )

        assert response.status_code == 405
        assert stored() == before

    each({f"{method} {url}": (method, url) for method, url in WRONG_METHODS}, check)


def test_an_operation_the_vm_cannot_do_now_is_refused_in_words_and_queues_nothing(portal):
    before = stored()

    response = portal.client.post(f"/vms/{portal.pool_vm.pk}/resume/", follow=True)

    messages = [str(message) for message in response.context["messages"]]
    assert messages == [f"VM {portal.pool_vm.name} is Down; it cannot resume from there."]
    assert stored() == before


def test_taking_beyond_the_users_limit_is_refused_in_words_and_assigns_nothing(portal):
    before = stored()

    response = portal.client.post(f"/pools/{portal.pool.pk}/take/", {"count": HUGE}, follow=True)

    [message] = [str(message) for message in response.context["messages"]]
    assert "its limit per user" in message
    assert stored() == before


def test_returning_a_vm_that_is_not_from_a_pool_is_refused_in_words(portal):
    before = stored()

    response = portal.client.post(f"/vms/{portal.lease_vm.pk}/return/", follow=True)

    [message] = [str(message) for message in response.context["messages"]]
    assert message == f"Only the user of {portal.lease_vm.name} or its pool's admin may return it."
    assert stored() == before


# -- what others wrote, shown in the portal ---------------------------------------------------


def test_markup_in_a_pool_description_and_a_job_error_is_shown_as_text(portal):
    VmPool.objects.filter(pk=portal.pool.pk).update(description=SCRIPT)
    job = Job.objects.create(
        kind=JobKind.START,
        vm=portal.pool_vm,
        requested_by=portal.user,
        state=JobState.FAILED,
        error_code="hook_failed",
        error_message=f"vm-pre-start said {SCRIPT}",
    )
    running = Job.objects.create(
        kind=JobKind.SHUTDOWN,
        vm=portal.pool_vm,
        requested_by=portal.user,
        state=JobState.RUNNING,
        step=IMG,
    )

    pages = [
        portal.client.get("/"),
        portal.client.get("/pools/cards/"),
        portal.client.get(f"/jobs/{job.pk}/"),
        portal.client.get(f"/vms/{portal.pool_vm.pk}/"),
        portal.client.get(f"/jobs/{running.pk}/"),
    ]

    for response in pages:
        assert response.status_code == 200
        assert_no_raw_markup(response.content.decode())
    assert html.escape(SCRIPT) in pages[0].content.decode()
    assert f"vm-pre-start said {html.escape(SCRIPT)}" in pages[2].content.decode()
    assert html.escape(IMG) in pages[4].content.decode()


# -- the event stream -------------------------------------------------------------------------


NOT_EVENT_IDS = ["abc", NOT_A_NUMBER, "1.5", "\x00", SCRIPT, "9" * 5000, "-5", str(-(10**30))]


def test_a_resume_point_that_is_not_an_event_id_is_a_400_in_words(make_user, settings):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.2
    client = client_of(make_user())

    def check(resume):
        headed = client.get("/events/stream/", HTTP_LAST_EVENT_ID=resume)
        queried = client.get("/events/stream/", {"since": resume})

        for response in (headed, queried):
            assert response.status_code == 400
            assert response.content.decode() == "Last-Event-ID must be an event id."

    each({repr(resume[:20]): (resume,) for resume in NOT_EVENT_IDS}, check)


@pytest.mark.parametrize("beyond", [1, 10**30])
def test_a_resume_point_beyond_the_feed_resumes_from_the_latest_event(make_user, settings, beyond):
    settings.CORRAL_EVENT_STREAM_SECONDS = 0.2
    client = client_of(make_user())
    latest = events.latest_token()

    response = client.get("/events/stream/", HTTP_LAST_EVENT_ID=str(latest + beyond))

    assert response.status_code == 200
    first = b"".join(response.streaming_content).decode().split("\n\n")[0]
    # The browser keeps this id and resumes from it: from an id no event will ever have, it
    # would wait for nothing forever.
    assert first.splitlines() == ["retry: 1000", f"id: {latest}"]


# -- logging in -------------------------------------------------------------------------------

BAD_LOGINS = {
    "markup username": ({"username": SCRIPT}, "login-error", "Please enter a correct username"),
    "image markup username": ({"username": IMG}, "login-error", "Please enter a correct username"),
    "null in the username": ({"username": "ann\x00"}, "id_username_error", NULL),
    "null in the password": ({"password": "pw\x00"}, "id_password_error", NULL),
    "long username": ({"username": LONG}, "login-error", "Please enter a correct username"),
    "no username": ({"username": ""}, "id_username_error", "This field is required."),
    "no password": ({"password": ""}, "id_password_error", "This field is required."),
    "long password": ({"password": LONG}, "login-error", "Please enter a correct username"),
}


@pytest.mark.parametrize("changes, where, message", BAD_LOGINS.values(), ids=BAD_LOGINS.keys())
def test_a_bad_login_comes_back_with_the_message_and_no_session(make_user, changes, where, message):
    make_user("ann")
    client = Client()
    failures = LoginFailure.objects.count()

    response = client.post("/login/", {"username": "ann", "password": "nope", **changes})

    assert response.status_code == 200
    page = response.content.decode()
    errors = page[page.index(f'id="{where}"') :].split("</ul>")[0]
    assert message in html.unescape(errors)
    assert_no_raw_markup(page)
    assert "_auth_user_id" not in client.session
    # Only a real attempt (a name and a password that could be checked) counts as a failure.
    counted = 1 if where == "login-error" else 0
    assert LoginFailure.objects.count() == failures + counted


@pytest.mark.parametrize("name", [SCRIPT, IMG])
def test_a_username_with_markup_is_echoed_as_text(make_user, name):
    response = Client().post("/login/", {"username": name, "password": "nope"})

    page = response.content.decode()
    assert_no_raw_markup(page)
    assert f'value="{html.escape(name)}"' in page


@pytest.mark.parametrize(
    "next_url",
    ["https://evil.example/", "//evil.example/", "javascript:alert(1)", "\\\\evil.example/"],
)
def test_a_login_never_sends_the_user_to_another_site(make_user, next_url):
    make_user("ann")
    client = Client()

    form = client.get("/login/", {"next": next_url})
    response = client.post(
        "/login/", {"username": "ann", "password": "pw-Corral-1", "next": next_url}
    )

    assert form.status_code == 200
    assert "evil" not in form.content.decode()
    assert (response.status_code, response.url) == (302, "/")


@pytest.mark.parametrize("next_url", [IMG, SCRIPT, "/\x00/", "/" + LONG])
def test_an_odd_next_address_stays_on_the_site_and_is_never_echoed_raw(make_user, next_url):
    make_user("ann")
    client = Client()

    form = client.get("/login/", {"next": next_url})
    response = client.post(
        "/login/", {"username": "ann", "password": "pw-Corral-1", "next": next_url}
    )

    assert form.status_code == 200
    assert_no_raw_markup(form.content.decode())
    assert response.status_code == 302
    target = urlsplit(response.url)
    assert (target.scheme, target.netloc) == ("", "")
    assert_no_raw_markup(response.url)
    assert "\x00" not in response.url

"""The portal's "My leases": the list and its timeline, creating a lease with a live capacity
answer, and a lease's page (launch a VM, change the end, delete), through the Django test
client on the real database."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from hosts.models import Host, Job, JobKind, JobState, VirtualMachine
from leases import lifecycle
from leases.models import Lease, LeaseStatus, Reservation
from tests.conftest import unique
from tests.leases.fixtures import at, instances
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


def local(moment: datetime) -> str:
    """What a datetime-local input sends for ``moment``."""
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def form_data(**changes) -> dict:
    data = {
        "name": "lab-week",
        "start": local(at(9)),
        "end": local(at(17)),
        "vcpus": "1",
        "memory_mb": "1024",
        "disk_gb": "10",
        "amount": "2",
        "affinity": "any",
    }
    data.update(changes)
    return {name: value for name, value in data.items() if value is not None}


@pytest.fixture
def hosts(make_host, make_cluster):
    """hosts(count) -> Up reservable hosts of 16 CPUs and 3072 MiB in one cluster: three
    instances of 1 vCPU and 1024 MiB each."""

    def add(count: int):
        cluster = make_cluster()
        return [
            make_host(cluster=cluster, reservable=True, status="up", cpus=16, memory_mb=3072)
            for _ in range(count)
        ]

    return add


@pytest.fixture
def alice(lease_user):
    return lease_user("alice")


@pytest.fixture
def bob(lease_user):
    return lease_user("bob")


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-lease="([^"]*)"', page)


def _field_error(page: str, field: str) -> bool:
    return f'<div class="field field-error" id="field-{field}">' in page


# -- the list ---------------------------------------------------------------------------------


def test_my_leases_lists_only_the_users_own_leases_with_their_reservations(
    hosts, alice, bob, make_lease
):
    hosts(2)
    make_lease(at(9), at(12), instances(2, affinity=False), owner=alice, name="alice-lab")
    make_lease(at(10), at(11), instances(1), owner=bob, name="bobs-lab")

    page = signed_in(alice).get("/leases/").content.decode()

    assert _rows(page) == ["alice-lab"]
    assert "bobs-lab" not in page
    assert "2 × 1 vCPU · 1024 MiB · 10 GB · distinct hosts" in page


def test_the_list_shows_status_window_and_the_degraded_flag(hosts, alice, make_lease):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(1), owner=alice, name="lab")
    Lease.objects.filter(pk=lease.pk).update(degraded=True)

    page = signed_in(alice).get("/leases/").content.decode()

    row = page[page.index('<tr data-lease="lab"') :].split("</tr>")[0]
    assert 'data-status="PENDING"' in row and "Pending" in row
    assert 'data-degraded="yes"' in row
    assert f"{at(9):%Y-%m-%d} 09:00" in row and f"{at(12):%Y-%m-%d} 12:00" in row


def test_a_degraded_leases_page_says_what_each_reservation_misses_and_from_when(
    hosts, alice, make_lease
):
    [host] = hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice, name="short")
    Host.objects.get(pk=host.pk).delete()

    page = signed_in(alice).get(f"/leases/{lease.pk}/panel/").content.decode()

    assert 'id="lease-degraded"' in page
    reservation = lease.reservations.get()
    section = page[page.index(f'data-reservation="{reservation.pk}"') :].split("</section>")[0]
    assert "Held on: no host</p>" in section
    assert (
        f'<p class="missing" data-missing="2">Missing: 2 instances from {at(9):%Y-%m-%d} 09:00.'
        in section
    )


def test_a_leases_page_says_in_words_that_a_reserved_host_does_not_respond(
    hosts, alice, make_lease
):
    [host] = hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice, name="lost")
    Host.objects.filter(pk=host.pk).update(status="non_responsive")

    page = signed_in(alice).get(f"/leases/{lease.pk}/panel/").content.decode()

    assert f'data-host="{host.name}">{host.name} (2 instances, host Not responding)</span>' in page


def test_the_timeline_draws_a_bar_per_lease_from_the_earliest_start_to_the_latest_end(
    hosts, alice, make_lease
):
    hosts(1)
    make_lease(at(9), at(12), instances(1), owner=alice, name="early")
    make_lease(at(12), at(21), instances(1), owner=alice, name="late")
    Lease.objects.filter(name="late").update(status=LeaseStatus.ACTIVE)

    page = signed_in(alice).get("/leases/").content.decode()

    svg = page[page.index('<svg id="lease-timeline"') : page.index("</svg>")]
    bars = dict(re.findall(r'data-bar="([^"]+)" data-status="([A-Z]+)"', svg))
    assert bars == {"early": "PENDING", "late": "ACTIVE"}
    rects = re.findall(
        r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="16" rx="3" '
        r'fill="(#[0-9a-f]+)"',
        svg,
    )
    (early_x, early_w, early_fill), (late_x, late_w, late_fill) = rects
    assert float(early_x) == 180  # the axis starts at the earliest start
    assert float(late_x) + float(late_w) == pytest.approx(944, abs=0.2)  # ends at the latest end
    assert float(early_w) == pytest.approx((944 - 180) / 4, abs=0.2)  # 3 of the 12 hours
    assert early_fill != late_fill  # coloured by status
    assert re.findall(r'<text x="[\d.]+" y="13" text-anchor="middle" fill="#5d6878">([^<]+)<', svg)


def test_the_list_fragment_refreshes_the_rows_and_timeline(hosts, alice, make_lease):
    hosts(1)
    make_lease(at(9), at(12), instances(1), owner=alice, name="lab")
    client = signed_in(alice)
    page = client.get("/leases/").content.decode()
    assert 'hx-get="/leases/list/"' in page

    fragment = client.get("/leases/list/").content.decode()

    assert _rows(fragment) == ["lab"]
    assert '<svg id="lease-timeline"' in fragment
    assert "<html" not in fragment


def test_the_list_takes_a_fixed_number_of_queries(
    hosts, lease_user, make_lease, django_assert_max_num_queries
):
    hosts(2)
    for count in (2, 20):
        owner = lease_user()
        for hour in range(count):
            make_lease(at(hour), at(hour + 1), instances(1), instances(1), owner=owner)
        client = signed_in(owner)
        with django_assert_max_num_queries(7):
            page = client.get("/leases/").content.decode()
        assert len(_rows(page)) == count
        with django_assert_max_num_queries(6):
            fragment = client.get("/leases/list/").content.decode()
        assert len(_rows(fragment)) == count


# -- another user's lease ---------------------------------------------------------------------

OTHERS = {
    "detail": ("get", "/leases/{}/", None),
    "panel": ("get", "/leases/{}/panel/", None),
    "confirm delete": ("get", "/leases/{}/delete/", None),
    "change end": ("post", "/leases/{}/end/", {"end": local(at(20))}),
    "launch": ("post", "/leases/{}/launch/", {"name": "x-1", "template": "1", "reservation": "1"}),
    "delete": ("post", "/leases/{}/delete/", {}),
}


@pytest.mark.parametrize("method, url, data", OTHERS.values(), ids=OTHERS.keys())
def test_another_users_lease_is_not_found_for_every_page_and_action(
    hosts, alice, bob, make_lease, method, url, data
):
    hosts(1)
    lease = make_lease(timezone.now(), at(12), instances(2), owner=alice)
    lifecycle.run_due_events()
    before = Lease.objects.filter(pk=lease.pk).values().get()

    client = signed_in(bob)
    response = getattr(client, method)(url.format(lease.pk), data)

    assert response.status_code == 404
    assert Lease.objects.filter(pk=lease.pk).values().get() == before
    assert not VirtualMachine.objects.exists()


# -- creating ---------------------------------------------------------------------------------


def test_a_lease_that_fits_is_created_and_listed(hosts, alice):
    hosts(1)
    client = signed_in(alice)

    response = client.post("/leases/new/", form_data(name="lab-week", amount="3"))

    lease = Lease.objects.get()
    assert (response.status_code, response.url) == (302, f"/leases/{lease.pk}/")
    assert (lease.owner, lease.start_date, lease.end_date) == (alice, at(9), at(17))
    reservation = lease.reservations.get()
    assert (reservation.amount, reservation.vcpus, reservation.memory_mb) == (3, 1, 1024)
    assert reservation.affinity is None
    assert _rows(client.get("/leases/").content.decode()) == ["lab-week"]


def test_a_lease_shared_with_a_group_is_seen_by_its_members(hosts, alice, bob, make_user):
    hosts(1)
    team = Group.objects.create(name=unique("team"))
    member = make_user()
    team.user_set.add(alice, member)
    client = signed_in(alice)
    assert team.name in client.get("/leases/new/").content.decode()

    response = client.post("/leases/new/", form_data(name="team-week", group=team.name))

    lease = Lease.objects.get()
    assert (response.status_code, lease.group) == (302, team)
    assert _rows(signed_in(member).get("/leases/").content.decode()) == ["team-week"]
    assert signed_in(member).get(f"/leases/{lease.pk}/").status_code == 200
    assert signed_in(bob).get(f"/leases/{lease.pk}/").status_code == 404


def test_a_lease_cannot_be_shared_with_a_group_of_others(hosts, alice, bob):
    hosts(1)
    team = Group.objects.create(name=unique("team"))
    team.user_set.add(bob)

    response = signed_in(alice).post("/leases/new/", form_data(group=team.name))

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Lease.objects.exists()


def test_start_now_starts_the_lease_at_once(hosts, alice):
    hosts(1)
    before = timezone.now()

    signed_in(alice).post("/leases/new/", form_data(start=None, start_now="on", affinity="same"))

    lease = Lease.objects.get()
    assert before <= lease.start_date <= timezone.now()
    assert lease.reservations.get().affinity is True
    lifecycle.run_due_events()
    assert Lease.objects.get().status == LeaseStatus.ACTIVE


BAD_INPUT = {
    "end before start": ({"end": local(at(8))}, "end", "The lease must end after it starts."),
    "end equal to start": ({"end": local(at(9))}, "end", "The lease must end after it starts."),
    "no start": ({"start": ""}, "start", "Pick a start, or tick"),
    "start in the past": (
        {"start": local(timezone.now() - timedelta(days=1))},
        "start",
        "The start is in the past",
    ),
    "start not a time": ({"start": "next tuesday"}, "start", "Enter a valid date/time."),
    "too long": ({"end": local(at(9, day=40))}, "end", "A lease may last at most 31 days."),
    "zero vCPUs": ({"vcpus": "0"}, "vcpus", "greater than or equal to 1"),
    "negative memory": ({"memory_mb": "-1024"}, "memory_mb", "greater than or equal to 16"),
    "zero disk": ({"disk_gb": "0"}, "disk_gb", "greater than or equal to 1"),
    "zero instances": ({"amount": "0"}, "amount", "greater than or equal to 1"),
    "huge amount": ({"amount": "99999999999999999999"}, "amount", "less than or equal to 10000"),
    "huge vCPUs": ({"vcpus": "513"}, "vcpus", "less than or equal to 512"),
    "words for a number": ({"memory_mb": "lots"}, "memory_mb", "Enter a whole number."),
    "no name": ({"name": ""}, "name", "This field is required."),
    "long name": ({"name": "x" * 81}, "name", "at most 80 characters"),
    "unknown affinity": ({"affinity": "anywhere"}, "affinity", "Select a valid choice."),
}


@pytest.mark.parametrize("changes, field, message", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_reported_next_to_its_field_and_nothing_is_stored(
    hosts, alice, changes, field, message
):
    hosts(1)

    response = signed_in(alice).post("/leases/new/", form_data(**changes))

    assert response.status_code == 200
    page = response.content.decode()
    assert _field_error(page, field)
    block = page[page.index(f'id="field-{field}"') :].split("</div>")[0]
    assert message in block.replace("&#x27;", "'")
    assert list(response.context["form"].errors) == [field]
    assert not Lease.objects.exists() and not Reservation.objects.exists()


def test_after_bad_input_the_form_still_says_whether_the_lease_fits(hosts, alice):
    hosts(1)

    response = signed_in(alice).post("/leases/new/", form_data(name=""))

    page = response.content.decode()
    assert _field_error(page, "name")
    answer = page[page.index('id="capacity-answer"') :].split("</div>")[0]
    assert 'data-fits="yes"' in answer and "Fits: 2 of 2 instances." in answer


def test_after_a_quota_refusal_the_form_still_says_the_lease_fits(hosts, alice, settings):
    hosts(1)
    settings.LEASE_QUOTA_INSTANCES = 1

    response = signed_in(alice).post("/leases/new/", form_data(amount="2"))

    page = response.content.decode()
    assert "your quota is 1" in page
    assert 'id="capacity-answer" data-fits="yes"' in page
    assert not Lease.objects.exists()


def test_a_name_with_markup_is_shown_as_text(hosts, alice):
    hosts(1)
    name = '<img src=x onerror="alert(1)">'
    client = signed_in(alice)

    detail = client.post("/leases/new/", form_data(name=name), follow=True).content.decode()
    listed = client.get("/leases/").content.decode()
    refused = client.post("/leases/new/", form_data(name=name, vcpus="0")).content.decode()

    escaped = "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    for page in (detail, listed, refused):
        assert name not in page
        assert escaped in page
    assert Lease.objects.get().name == name


def test_a_lease_that_does_not_fit_is_refused_with_the_reason_and_nothing_stored(hosts, alice):
    hosts(2)

    response = signed_in(alice).post("/leases/new/", form_data(amount="4", affinity="same"))

    assert response.status_code == 200
    page = response.content.decode()
    refusal = page[page.index('id="lease-refused"') :].split("</ul>")[0]
    assert "The lease does not fit: only 3 of 4 instances fit on one host between" in refusal
    assert page.lower().count("only 3 of 4") == 1  # said once: the live answer waits for a change
    assert not Lease.objects.exists() and not Reservation.objects.exists()


def test_a_user_without_the_lease_role_is_told_so_and_cannot_create(hosts, make_user):
    hosts(1)
    user = make_user()
    client = signed_in(user)

    page = client.get("/leases/new/").content.decode()
    response = client.post("/leases/new/", form_data())
    check = client.post("/leases/check/", form_data()).content.decode()

    assert 'id="no-lease-role"' in page and "LeaseUser" in page
    assert 'id="lease-form"' not in page
    assert (response.status_code, response.url) == (302, "/leases/")
    assert "Creating leases needs the LeaseUser role" in messages_of(client.get("/leases/"))[0]
    assert 'data-fits="unknown"' in check and "LeaseUser" in check
    assert not Lease.objects.exists()


# -- the live capacity answer -------------------------------------------------------------------


def _answer(client, **changes) -> tuple[str, str]:
    page = client.post("/leases/check/", form_data(**changes)).content.decode()
    fits = re.search(r'id="capacity-answer" data-fits="(\w+)"', page).group(1)
    return fits, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).strip()


def test_the_capacity_answer_says_when_every_instance_fits(hosts, alice):
    hosts(2)

    fits, text = _answer(signed_in(alice), amount="5")

    assert fits == "yes"
    assert "Fits: 5 of 5 instances." in text
    assert not Lease.objects.exists()


@pytest.mark.parametrize(
    "affinity, amount, fitting",
    [("any", "8", 6), ("distinct", "3", 2), ("same", "5", 3)],
)
def test_the_capacity_answer_says_how_many_fit_and_why(hosts, alice, affinity, amount, fitting):
    hosts(2)

    fits, text = _answer(signed_in(alice), amount=amount, affinity=affinity)

    assert fits == "partial"
    assert f"Only {fitting} of {amount} fit in that window." in text
    assert f"Only {fitting} of {amount} instances fit" in text  # the planner's reason


def test_the_capacity_answer_counts_other_leases_in_the_window(hosts, alice, bob, make_lease):
    hosts(1)
    make_lease(at(8), at(10), instances(2), owner=bob)

    assert _answer(signed_in(alice), amount="2")[0] == "partial"
    assert _answer(signed_in(alice), amount="2", start=local(at(10)))[0] == "yes"


def test_the_capacity_answer_says_nothing_fits_without_free_capacity(hosts, alice):
    fits, text = _answer(signed_in(alice), amount="2")

    assert fits == "no"
    assert "Nothing fits in that window: 0 of 2 instances." in text
    assert "Only 0 of 2 instances fit between" in text


def test_the_capacity_answer_takes_a_fixed_number_of_queries(
    hosts, alice, bob, make_lease, django_assert_max_num_queries
):
    hosts(4)
    client = signed_in(alice)
    for count in (1, 12):
        for hour in range(count):
            make_lease(at(hour, day=count), at(hour + 2, day=count), instances(1), owner=bob)
        with django_assert_max_num_queries(6):
            window = {"start": local(at(0, day=count)), "end": local(at(23, day=count))}
            fits, _ = _answer(client, amount="40", **window)
        assert fits == "partial"


def test_the_capacity_answer_asks_for_a_valid_window_first(hosts, alice):
    hosts(1)

    fits, text = _answer(signed_in(alice), name="", end=local(at(8)))

    assert fits == "unknown"
    assert "End: The lease must end after it starts." in text


def test_the_form_asks_for_the_capacity_answer_on_every_change(alice):
    page = signed_in(alice).get("/leases/new/").content.decode()

    form = page[page.index('<form method="post" action="/leases/new/" id="lease-form"') :]
    assert 'hx-post="/leases/check/"' in form
    assert "change from:#lease-form" in form
    assert 'hx-include="#lease-form"' in form


# -- a lease's page: change the end, delete ---------------------------------------------------


def test_the_lease_page_shows_status_events_and_reservations(hosts, alice, make_lease):
    [host] = hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice, name="lab")

    page = signed_in(alice).get(f"/leases/{lease.pk}/").content.decode()

    assert 'id="lease-status" class="status" data-status="PENDING"' in page
    events = re.findall(r'<tr data-event="(\w+)" data-status="(\w+)"', page)
    assert events == [
        ("start_lease", "UNDONE"),
        ("before_end_lease", "UNDONE"),
        ("end_lease", "UNDONE"),
    ]
    assert f'data-host="{host.name}">{host.name} (2 instances)' in page
    assert 'id="end-form"' in page and 'id="delete-start"' in page
    assert 'id="launch-form"' not in page  # not active yet


def test_changing_the_end_extends_the_lease(hosts, alice, make_lease):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice)
    client = signed_in(alice)

    response = client.post(f"/leases/{lease.pk}/end/", {"end": local(at(15))})

    assert (response.status_code, response.url) == (302, f"/leases/{lease.pk}/")
    assert Lease.objects.get(pk=lease.pk).end_date == at(15)
    assert messages_of(client.get(response.url)) == [
        f"Lease {lease.name} now ends at {at(15):%Y-%m-%d} 15:00."
    ]


def test_an_extension_that_does_not_fit_is_refused_with_the_reason(hosts, alice, bob, make_lease):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice)
    make_lease(at(12), at(15), instances(2), owner=bob)

    response = signed_in(alice).post(f"/leases/{lease.pk}/end/", {"end": local(at(14))})

    assert response.status_code == 200
    page = response.content.decode()
    assert _field_error(page, "end")
    assert "The change does not fit: only 1 of 2 instances fit between" in page
    assert Lease.objects.get(pk=lease.pk).end_date == at(12)


@pytest.mark.parametrize(
    "end, message",
    [("", "This field is required."), ("soon", "Enter a valid date/time."), ("past", "future")],
)
def test_a_bad_new_end_is_reported_next_to_the_field(hosts, alice, make_lease, end, message):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(1), owner=alice)
    if end == "past":
        end = local(timezone.now() - timedelta(hours=1))

    response = signed_in(alice).post(f"/leases/{lease.pk}/end/", {"end": end})

    assert response.status_code == 200
    assert _field_error(response.content.decode(), "end")
    assert message in response.content.decode()
    assert Lease.objects.get(pk=lease.pk).end_date == at(12)


def test_deleting_asks_for_confirmation_then_deletes(hosts, alice, make_lease):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(1), owner=alice, name="lab")
    client = signed_in(alice)

    confirm = client.get(f"/leases/{lease.pk}/delete/")
    assert 'id="confirm-delete-button"' in confirm.content.decode()
    assert Lease.objects.filter(pk=lease.pk).exists()

    response = client.post(f"/leases/{lease.pk}/delete/")

    assert (response.status_code, response.url) == (302, "/leases/")
    assert not Lease.objects.filter(pk=lease.pk).exists()
    listed = client.get("/leases/")
    assert _rows(listed.content.decode()) == []
    assert messages_of(listed) == ["Lease lab deleted."]


def test_deleting_an_active_lease_ends_it_and_powers_off_its_vms(
    hosts, alice, make_lease, make_template
):
    hosts(1)
    lease = make_lease(timezone.now(), at(12), instances(1), owner=alice)
    lifecycle.run_due_events()
    template = make_template(cluster=None, vcpus=1, memory_mb=1024)
    client = signed_in(alice)
    reservation = lease.reservations.get()
    client.post(
        f"/leases/{lease.pk}/launch/",
        {"reservation": reservation.pk, "template": template.pk, "name": "lab-1"},
    )
    VirtualMachine.objects.filter(name="lab-1").update(status="up")

    confirm = client.get(f"/leases/{lease.pk}/delete/").content.decode()
    client.post(f"/leases/{lease.pk}/delete/")

    assert "its 1 VM is powered off" in confirm
    assert not Lease.objects.exists()
    vm = VirtualMachine.objects.get(name="lab-1")
    assert vm.reservation is None
    assert Job.objects.filter(vm=vm, kind=JobKind.POWEROFF).exists()


def test_a_user_who_may_only_look_cannot_change_or_delete(
    hosts, alice, make_user, make_lease, make_role, grant
):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(1), owner=alice)
    make_role("LeaseViewer", ["leases.view_lease"])
    viewer = make_user()
    grant(viewer, "LeaseViewer", lease)
    client = signed_in(viewer)

    page = client.get(f"/leases/{lease.pk}/").content.decode()
    changed = client.post(f"/leases/{lease.pk}/end/", {"end": local(at(15))})
    deleted = client.post(f"/leases/{lease.pk}/delete/")

    assert 'id="end-form"' not in page and 'id="delete-start"' not in page
    assert changed.status_code == deleted.status_code == 302
    assert "may look at lease" in messages_of(client.get(f"/leases/{lease.pk}/"))[0]
    assert Lease.objects.get(pk=lease.pk).end_date == at(12)


# -- launching a VM into an active reservation --------------------------------------------------


@pytest.fixture
def active_lease(hosts, alice, make_lease):
    """A lease of alice's from now, started by its start event, of two instances."""
    hosts(1)
    lease = make_lease(timezone.now(), at(12), instances(2), owner=alice, name="lab")
    lifecycle.run_due_events()
    lease.refresh_from_db()
    assert lease.status == LeaseStatus.ACTIVE
    return lease


@pytest.fixture
def small(make_template):
    return make_template(name="small", cluster=None, vcpus=1, memory_mb=1024, disk_gb=10)


def test_a_vm_launched_into_an_active_reservation_starts_and_appears_in_my_vms(
    active_lease, small, alice
):
    client = signed_in(alice)
    page = client.get(f"/leases/{active_lease.pk}/").content.decode()
    assert 'id="launch-form"' in page and 'value="lab-1"' in page
    reservation = active_lease.reservations.get()

    response = client.post(
        f"/leases/{active_lease.pk}/launch/",
        {"reservation": reservation.pk, "template": small.pk, "name": "lab-1"},
    )

    vm = VirtualMachine.objects.get()
    assert (response.status_code, response.url) == (302, f"/vms/{vm.pk}/")
    assert (vm.name, vm.reservation, vm.owner, vm.cluster_id) == (
        "lab-1",
        reservation,
        alice,
        reservation.allocations.get().host.cluster_id,
    )
    job = Job.objects.get(vm=vm)
    assert (job.kind, job.state, job.requested_by) == (JobKind.START, JobState.PENDING, alice)
    assert '<tr data-vm="lab-1">' in client.get("/vms/").content.decode()
    lease_page = client.get(f"/leases/{active_lease.pk}/").content.decode()
    assert '<li data-vm="lab-1">' in lease_page


def test_no_more_vms_launch_than_the_reservation_holds(active_lease, small, alice):
    client = signed_in(alice)
    reservation = active_lease.reservations.get()
    for name in ("lab-1", "lab-2"):
        body = {"reservation": reservation.pk, "template": small.pk, "name": name}
        assert client.post(f"/leases/{active_lease.pk}/launch/", body).status_code == 302

    response = client.post(
        f"/leases/{active_lease.pk}/launch/",
        {"reservation": reservation.pk, "template": small.pk, "name": "lab-3"},
    )

    assert response.status_code == 200
    assert _field_error(response.content.decode(), "reservation")
    assert "The reservation&#x27;s 2 instances are all launched." in response.content.decode()
    assert VirtualMachine.objects.count() == 2


def test_a_lease_whose_instances_are_all_launched_disables_launching_and_says_why(
    hosts, alice, make_lease, small
):
    hosts(1)
    lease = make_lease(timezone.now(), at(12), instances(1), owner=alice, name="solo")
    lifecycle.run_due_events()
    client = signed_in(alice)
    reservation = lease.reservations.get()
    body = {"reservation": reservation.pk, "template": small.pk, "name": "solo-1"}
    assert client.post(f"/leases/{lease.pk}/launch/", body).status_code == 302

    page = client.get(f"/leases/{lease.pk}/").content.decode()

    assert 'VMs launched: <span class="launched">1</span> of 1' in page
    assert (
        '<p class="muted" id="launch-why">The reservation&#x27;s only instance is launched. '
        "Delete one of its VMs to launch another.</p>"
    ) in page
    assert 'id="launch-submit" disabled aria-describedby="launch-why"' in page


def test_a_lease_with_an_instance_left_leaves_launching_enabled(active_lease, small, alice):
    page = signed_in(alice).get(f"/leases/{active_lease.pk}/").content.decode()

    assert 'id="launch-submit">' in page and 'id="launch-why"' not in page


def _offered_templates(page: str) -> list[str]:
    field = page[page.index('id="field-template"') :].split("</select>")[0]
    return re.findall(r"<option[^>]*>([^ <]+) \(", field)


def test_the_launch_form_offers_only_templates_that_fit_the_reservation(
    active_lease, small, alice, make_template, make_cluster, grant
):
    cluster, other = active_lease.reservations.get().allocations.get().host.cluster, make_cluster()
    for each in (cluster, other):  # alice may use the templates of both clusters
        grant(alice, "PowerUser", each)
    make_template(name="here", cluster=cluster, vcpus=1, memory_mb=512, disk_gb=10)
    make_template(name="elsewhere", cluster=other, vcpus=1, memory_mb=512, disk_gb=5)
    make_template(name="more-cpus", cluster=None, vcpus=2, memory_mb=512, disk_gb=10)
    make_template(name="more-memory", cluster=None, vcpus=1, memory_mb=2048, disk_gb=10)
    make_template(name="more-disk", cluster=None, vcpus=1, memory_mb=512, disk_gb=20)

    page = signed_in(alice).get(f"/leases/{active_lease.pk}/").content.decode()

    assert _offered_templates(page) == ["here", "small"]


def test_the_launch_form_offers_the_users_own_template_and_not_another_users(
    active_lease, small, alice, make_user, make_template, grant
):
    cluster = active_lease.reservations.get().allocations.get().host.cluster
    grant(alice, "PowerUser", cluster)
    size = {"vcpus": 1, "memory_mb": 512, "disk_gb": 10, "visibility": "private"}
    make_template(name="alices", cluster=cluster, owner=alice, **size)
    bobs = make_template(name="bobs", cluster=cluster, owner=make_user("bob"), **size)
    client = signed_in(alice)

    page = client.get(f"/leases/{active_lease.pk}/").content.decode()
    refused = client.post(
        f"/leases/{active_lease.pk}/launch/",
        {"reservation": active_lease.reservations.get().pk, "template": bobs.pk, "name": "x-1"},
    )

    assert _offered_templates(page) == ["alices", "small"]
    assert _field_error(refused.content.decode(), "template")
    assert not VirtualMachine.objects.exists()


def test_a_reservation_no_template_fits_says_so_at_the_template(active_lease, alice, make_template):
    make_template(name="large", cluster=None, vcpus=2, memory_mb=4096, disk_gb=10)

    page = signed_in(alice).get(f"/leases/{active_lease.pk}/").content.decode()

    assert _offered_templates(page) == []
    field = page[page.index('id="field-template"') :].split("</select>")[0]
    assert "No template you may use fits this reservation; ask an administrator." in field


def test_each_reservation_of_a_lease_is_offered_the_templates_of_its_own_cluster(
    reservable_hosts, alice, make_lease, make_template, grant
):
    reservable_hosts(1, capabilities={"zone": "a"})
    [far] = reservable_hosts(1, capabilities={"zone": "b"})  # in a cluster of its own
    lease = make_lease(
        timezone.now(), at(12), instances(1, zone="a"), instances(1, zone="b"), owner=alice
    )
    lifecycle.run_due_events()
    near_reservation, far_reservation = lease.reservations.order_by("pk")
    near = near_reservation.allocations.get().host.cluster
    make_template(name="near-t", cluster=near, vcpus=1, memory_mb=1024, disk_gb=10)
    make_template(name="far-t", cluster=far.cluster, vcpus=1, memory_mb=1024, disk_gb=10)
    for cluster in (near, far.cluster):
        grant(alice, "PowerUser", cluster)
    client = signed_in(alice)

    page = client.get(f"/leases/{lease.pk}/").content.decode()
    chosen = client.get(
        f"/leases/{lease.pk}/launch/templates/", {"reservation": far_reservation.pk}
    ).content.decode()

    assert _offered_templates(page) == ["near-t"]
    assert f'hx-get="/leases/{lease.pk}/launch/templates/"' in page
    assert _offered_templates(chosen) == ["far-t"]


def test_a_launch_with_a_bad_name_is_refused_next_to_the_name(active_lease, small, alice):
    reservation = active_lease.reservations.get()

    response = signed_in(alice).post(
        f"/leases/{active_lease.pk}/launch/",
        {"reservation": reservation.pk, "template": small.pk, "name": "<b>x</b>"},
    )

    page = response.content.decode()
    assert _field_error(page, "name")
    assert "Use letters, digits" in page and "<b>x</b>" not in page
    assert not VirtualMachine.objects.exists()


def test_a_template_larger_than_the_reservation_is_not_offered_or_accepted(
    active_lease, small, alice, make_template
):
    large = make_template(name="large", cluster=None, vcpus=2, memory_mb=4096)
    reservation = active_lease.reservations.get()
    client = signed_in(alice)

    page = client.get(f"/leases/{active_lease.pk}/").content.decode()
    response = client.post(
        f"/leases/{active_lease.pk}/launch/",
        {"reservation": reservation.pk, "template": large.pk, "name": "big-1"},
    )

    assert "small (1 vCPU" in page and "large (2 vCPU" not in page
    assert _field_error(response.content.decode(), "template")
    assert not VirtualMachine.objects.exists()


def test_nothing_launches_into_a_lease_that_has_not_started(hosts, alice, make_lease, small):
    hosts(1)
    lease = make_lease(at(9), at(12), instances(2), owner=alice)

    response = signed_in(alice).post(
        f"/leases/{lease.pk}/launch/",
        {"reservation": lease.reservations.get().pk, "template": small.pk, "name": "early-1"},
    )

    assert response.status_code == 200
    assert _field_error(response.content.decode(), "reservation")
    assert not VirtualMachine.objects.exists()

"""Events in the admin console: the alert feed, filtered by age and object type, scoped to what
the admin may see, and read-only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from project.events import alert, emit
from project.models import Event
from tests.project.admin.fixtures import admin_url

pytestmark = pytest.mark.django_db


def test_the_event_list_filters_alerts_of_the_last_day(superuser_console):
    recent = alert("vm", 1, "VM web-1 stopped outside Corral")
    old = alert("vm", 2, "VM web-2 stopped outside Corral")
    Event.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    emit("changed", "vm", 3, "VM web-3 is Up")

    response = superuser_console.get(
        admin_url("project.Event", "changelist"), {"kind__exact": "alert", "age": "24h"}
    )

    assert [event.pk for event in response.context["cl"].result_list] == [recent.pk]


def test_the_event_list_filters_by_object_type(superuser_console):
    alert("vm", 1, "VM web-1 stopped outside Corral")
    host_alert = alert("host", 1, "Host kvm-1 is not responding")

    response = superuser_console.get(
        admin_url("project.Event", "changelist"), {"object_type": "host"}
    )

    assert [event.pk for event in response.context["cl"].result_list] == [host_alert.pk]


def test_a_cluster_admin_sees_only_the_alerts_of_their_cluster(console_of_a, cluster_a, cluster_b):
    alert("host", 1, "Host kvm-a is not responding", cluster_id=cluster_a.pk)
    alert("host", 2, "Host kvm-b is not responding", cluster_id=cluster_b.pk)

    response = console_of_a.get(admin_url("project.Event", "changelist"))

    assert [event.message for event in response.context["cl"].result_list] == [
        "Host kvm-a is not responding"
    ]


def test_events_are_read_only(superuser_console):
    event = alert("vm", 1, "VM web-1 stopped outside Corral")

    response = superuser_console.post(
        admin_url("project.Event", "change", event.pk), {"message": "edited"}
    )

    assert response.status_code == 403
    event.refresh_from_db()
    assert event.message == "VM web-1 stopped outside Corral"

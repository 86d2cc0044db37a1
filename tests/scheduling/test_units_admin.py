"""Policy units in the admin console: a system-wide PolicyAdmin disables a unit or makes a
failing filter drop every host; a PolicyAdmin of one cluster only reads them."""

import re

import pytest
from django.urls import reverse

from scheduling.models import PolicyUnit
from tests.project.admin.fixtures import logged_in, shown_fields

pytestmark = pytest.mark.django_db


def _form(unit: PolicyUnit, **changes) -> dict:
    return {"enabled": "on" if unit.enabled else "", "on_failure": unit.on_failure, **changes}


def test_a_system_wide_policy_admin_disables_a_unit_and_makes_its_failures_drop_hosts(
    make_user, grant
):
    user = make_user(is_staff=True)
    grant(user, "PolicyAdmin")
    unit = PolicyUnit.objects.get(name="Memory")
    url = reverse("admin:scheduling_policyunit_change", args=[unit.pk])

    response = logged_in(user).post(url, _form(unit, enabled="", on_failure="drop"))

    assert response.status_code == 302
    unit.refresh_from_db()
    assert (unit.enabled, unit.on_failure) == (False, "drop")


def test_a_weight_cannot_be_told_to_drop_hosts(admin_user):
    unit = PolicyUnit.objects.get(name="OptimalForEvenMemoryDistribution")
    url = reverse("admin:scheduling_policyunit_change", args=[unit.pk])
    console = logged_in(admin_user)

    page = console.get(url)
    console.post(url, _form(unit, on_failure="drop"))

    assert 'name="on_failure"' not in page.content.decode()
    assert shown_fields(page)["On failure"] == "Its scores count for nothing (neutral)"
    assert PolicyUnit.objects.get(pk=unit.pk).on_failure == "keep"


def test_the_unit_list_says_what_a_failure_does_for_each_kind_of_unit(admin_user):
    page = logged_in(admin_user).get(reverse("admin:scheduling_policyunit_changelist"))

    said = dict(
        re.findall(
            r'<th class="field-name"><a [^>]*>(\w+)</a></th>.*?'
            r'<td class="field-failure_outcome">([^<]*)</td>',
            page.content.decode(),
        )
    )
    assert said["Memory"] == "Keep every host (skip the filter)"
    assert said["OptimalForEvenMemoryDistribution"] == "Its scores count for nothing (neutral)"
    assert said["OptimalForPowerSavingBalance"] == "It moves nothing"
    assert said["OptimalForEvenGuestDistribution"] == (
        "as a weight: its scores count for nothing (neutral); as a balancer: it moves nothing"
    )
    assert said["VmAffinityGroups"] == (
        "as a filter: keep every host (skip the filter); as a weight: its scores count for "
        "nothing (neutral)"
    )


def test_a_policy_admin_of_one_cluster_only_reads_the_units(make_user, grant, make_cluster):
    user = make_user(is_staff=True)
    grant(user, "PolicyAdmin", make_cluster())
    unit = PolicyUnit.objects.get(name="Memory")
    url = reverse("admin:scheduling_policyunit_change", args=[unit.pk])
    console = logged_in(user)

    page = console.get(url)
    refused = console.post(url, _form(unit, enabled=""))

    assert page.status_code == 200 and 'name="enabled"' not in page.content.decode()
    assert refused.status_code == 403
    assert PolicyUnit.objects.get(pk=unit.pk).enabled is True

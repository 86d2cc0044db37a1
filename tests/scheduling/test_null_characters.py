"""A policy unit named with a null character, when adding a filter, a weight or a balancer to a
policy: a field message, never a server error (PostgreSQL refuses such text outright)."""

import pytest

from scheduling.models import Policy


@pytest.mark.parametrize("part", ["filters", "weights", "balances"])
def test_a_unit_named_with_a_null_character_is_a_field_error(admin_user, client_for, part):
    policy = Policy.objects.create(name="nul-policy")

    response = client_for(admin_user).post(
        f"/api/schedulingpolicies/{policy.pk}/{part}/", {"unit": "None\x00"}
    )

    assert response.status_code == 400
    assert response.json()["unit"] == ["Null characters are not allowed."]
    policy.refresh_from_db()
    assert (policy.filters.count(), policy.weights.count(), policy.balance) == (0, 0, None)

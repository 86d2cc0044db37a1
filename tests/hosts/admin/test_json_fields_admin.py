"""JSON typed into the admin console is held to the API's limits: a host's capabilities are
single values, nothing nests past the limit (Django's own field raised RecursionError, a
500), and a lone surrogate escape never reaches the database or the page shown back. Each is
a message on the form, and nothing is written.
"""

from __future__ import annotations

import pytest

from hosts.models import Host
from project.json_input import MAX_DEPTH
from tests.hosts.admin.test_moves_admin import form_errors, page_form
from tests.project.admin.fixtures import admin_url, logged_in

pytestmark = pytest.mark.django_db

NOT_ONE_VALUE = (
    "&#x27;gpu&#x27; must be a single value (text, a number, true or false), "
    "not a list or an object."
)


@pytest.mark.parametrize(
    "typed,message",
    [
        ('{"gpu": ["a100"]}', NOT_ONE_VALUE),
        ('{"gpu": {"model": "a100"}}', NOT_ONE_VALUE),
        ('{"gpu": "\\ud800"}', "Surrogate characters are not allowed: U+D800 (in gpu)."),
        ("[" * 100_000, f"Nested deeper than {MAX_DEPTH} levels."),
        ('{"gpu": ' + "[" * 40 + "]" * 40 + "}", f"Nested deeper than {MAX_DEPTH} levels."),
    ],
    ids=["list", "object", "lone surrogate", "nested thousands deep", "nested past the limit"],
)
def test_bad_host_capabilities_are_a_form_error(admin_user, make_host, typed, message):
    host = make_host(capabilities={"gpu": "a100"})
    console = logged_in(admin_user)
    url = admin_url("hosts.Host", "change", host.pk)

    response = console.post(url, {**page_form(console, url), "capabilities": typed})

    assert message in form_errors(response)
    host.refresh_from_db()
    assert host.capabilities == {"gpu": "a100"}


def test_flat_host_capabilities_are_saved(admin_user, make_host):
    host = make_host()
    console = logged_in(admin_user)
    url = admin_url("hosts.Host", "change", host.pk)

    response = console.post(
        url, {**page_form(console, url), "capabilities": '{"gpu": "a100", "ssd": true}'}
    )

    assert response.status_code == 302
    assert Host.objects.get(pk=host.pk).capabilities == {"gpu": "a100", "ssd": True}

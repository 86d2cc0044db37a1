"""Fixtures for the admin console tests: two clusters, a superuser and a staff ClusterAdmin of
the first one, each with a logged-in browser session (Django's test client), and posting
admin actions the way the changelist's action form does.

Loaded for the whole suite (tests/conftest.py): each app's admin screens are tested beside
that app's other tests."""

from __future__ import annotations

import itertools
import re
from html import unescape

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

_roles = itertools.count(1)


def admin_url(label: str, view: str, *args) -> str:
    app_label, model_name = label.lower().split(".")
    return reverse(f"admin:{app_label}_{model_name}_{view}", args=args)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def cluster_a(make_cluster):
    return make_cluster("cluster-a")


@pytest.fixture
def cluster_b(make_cluster):
    return make_cluster("cluster-b")


@pytest.fixture
def admin_of_a(make_user, grant, cluster_a):
    """A staff user holding ClusterAdmin on cluster A only."""
    user = make_user("admin-of-a", is_staff=True)
    grant(user, "ClusterAdmin", cluster_a)
    return user


@pytest.fixture
def superuser_console(admin_user):
    return logged_in(admin_user)


@pytest.fixture
def console_of_a(admin_of_a):
    return logged_in(admin_of_a)


@pytest.fixture
def staff_with_role(make_user, grant, make_role):
    """staff_with_role(actions, scope) -> a staff user holding a custom role of exactly those
    actions on ``scope``."""

    def make(actions: list[str], scope):
        user = make_user(is_staff=True)
        role = make_role(f"Custom{next(_roles)}", actions)
        grant(user, role.name, scope)
        return user

    return make


def run_action(client: Client, label: str, action: str, objects, **extra):
    """Post an admin action on the selected objects from their changelist, following the
    redirect back to it; the response carries the messages shown."""
    return client.post(
        admin_url(label, "changelist"),
        {"action": action, "_selected_action": [obj.pk for obj in objects], **extra},
        follow=True,
    )


def shown_messages(response) -> list[tuple[str, str]]:
    """(level, text) of every message the page shows."""
    return [(message.level_tag, str(message)) for message in get_messages(response.wsgi_request)]


def page_form(client, url: str) -> dict:
    """The data the admin page's form would post back unchanged, inline rows included."""
    response = client.get(url)
    assert response.status_code == 200, url
    data = _bound_values(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update(_bound_values(formset.management_form))
        for row in formset.forms:
            data.update(_bound_values(row))
    return data


def _bound_values(form) -> dict:
    data = {}
    for name in form.fields:
        value = form[name].value()
        data[form.add_prefix(name)] = "" if value is None else value
    return data


def form_errors(response) -> str:
    assert response.status_code == 200, response.get("Location")
    return str(response.context["adminform"].form.errors)


_READONLY = re.compile(
    r'<label[^>]*>([^<]*?):?</label>\s*<div class="readonly">(.*?)</div>', re.DOTALL
)


def shown_fields(response) -> dict[str, str]:
    """What an admin page shows of each read-only field: its label, without the colon, and its
    text with the tags taken out and the spaces joined ("Progress": "100 %")."""
    html = response.content.decode()
    return {
        unescape(label.strip()): " ".join(unescape(re.sub(r"<[^>]+>", " ", value)).split())
        for label, value in _READONLY.findall(html)
    }

"""Logging in at the three entry points (the portal, the admin console, the API's token
endpoint) from a given client address, and reading what each answered."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from rest_framework.test import APIClient

from project.models import LoginFailure

PASSWORD = "pw-Corral-1"  # what make_user gives everyone
HOME = "127.0.0.1"  # Django's test client's own address
LOCKED = "Too many failed log-ins for this account; try again in"
ADDRESS_LOCKED = "Too many failed log-ins from your address; try again in"


def _client(cls, address: str, forwarded: str | None):
    headers = {"REMOTE_ADDR": address}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return cls(**headers)


def portal(username: str, password: str, address: str = HOME, forwarded: str | None = None):
    form = {"username": username, "password": password}
    return _client(Client, address, forwarded).post("/login/", form)


def admin(username: str, password: str, address: str = HOME, forwarded: str | None = None):
    form = {"username": username, "password": password}
    return _client(Client, address, forwarded).post("/admin/login/", form)


def api(username: str, password: str, address: str = HOME, forwarded: str | None = None):
    body = {"username": username, "password": password}
    return _client(APIClient, address, forwarded).post("/api/auth/token/", body, format="json")


ENTRIES = [portal, admin, api]
ENTRY_IDS = ["portal", "admin", "api"]


def logged_in(response) -> bool:
    """Whether a log-in attempt at any of the three entry points let the user in."""
    if response.wsgi_request.path == "/api/auth/token/":
        return response.status_code == 200 and "token" in response.json()
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


def refused_as_wrong(response) -> bool:
    """A plain wrong-password answer: 400 from the API, the form again (200) with its message."""
    if response.wsgi_request.path == "/api/auth/token/":
        return response.status_code == 400 and response.json() == {
            "non_field_errors": ["Unable to log in with provided credentials."]
        }
    wrong = {
        "/login/": "Please enter a correct username and password.",
        "/admin/login/": "Please enter the correct username and password for a staff account.",
    }[response.wsgi_request.path]
    return response.status_code == 200 and wrong in response.content.decode()


def refusal_message(response) -> str | None:
    """The lockout's message if the attempt was refused by it (429 with a Retry-After
    everywhere), else None."""
    if response.status_code != 429 or not 0 < int(response.headers["Retry-After"]) <= 900:
        return None
    if response.wsgi_request.path == "/api/auth/token/":
        return response.json()["detail"]
    page = response.content.decode()
    for start in (LOCKED, ADDRESS_LOCKED):
        if start in page:
            return page[page.index(start) :].split("<")[0].strip()
    return None


def refused_as_locked(response) -> bool:
    message = refusal_message(response)
    return message is not None and message.startswith(LOCKED)


def refused_as_address_locked(response) -> bool:
    message = refusal_message(response)
    return message is not None and message.startswith(ADDRESS_LOCKED)


def fail(entry, username: str, times: int, address: str = HOME, **client) -> None:
    for _ in range(times):
        assert refused_as_wrong(entry(username, "wrong-password", address, **client))


def age_failures(username: str, minutes: float) -> None:
    """Move the recorded failures of ``username`` that many minutes into the past."""
    for failure in LoginFailure.objects.filter(username=username.lower()):
        failure.at -= timedelta(minutes=minutes)
        failure.save(update_fields=["at"])

"""Fixtures for the access-control tests: places to grant on, callers holding grants, tokens."""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from rest_framework.test import APIClient

from leases.models import Lease
from project.access.permissions import permission_for
from project.access.roles import ensure_grant_permissions
from project.models import Role
from tests.conftest import unique

STRONG_PASSWORD = "Long-enough-pass-42"


class Place:
    """A cluster and what lives in it, each object made on first use.

    The VM sits in the pool, so a grant on the cluster, the pool or the VM reaches it. Users
    and groups live outside clusters; a place makes them too so every matrix row reads alike.
    """

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._fixture = request.getfixturevalue

    @cached_property
    def cluster(self):
        return self._fixture("make_cluster")()

    @cached_property
    def template(self):
        return self._fixture("make_template")(cluster=self.cluster)

    @cached_property
    def image(self):
        return self._fixture("make_image")(cluster=self.cluster)

    @cached_property
    def host(self):
        return self._fixture("make_host")(cluster=self.cluster)

    @cached_property
    def pool(self):
        return self._fixture("make_pool")(cluster=self.cluster, template=self.template)

    @cached_property
    def vm(self):
        return self._fixture("make_vm")(
            cluster=self.cluster, template=self.template, pool=self.pool
        )

    @cached_property
    def lease(self):
        return self._fixture("make_lease")()

    @cached_property
    def user(self):
        return self._fixture("make_user")()

    @cached_property
    def group(self):
        return Group.objects.create(name=unique("group"))

    def scope(self, name: str):
        """The object a grant at scope ``name`` attaches to here (None: the whole system)."""
        if name == "system":
            return None
        return getattr(self, name)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Hash passwords cheaply: these tests make hundreds of users, none of them real."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def home(db, request) -> Place:
    """The place holding the object under test."""
    return Place(request)


@pytest.fixture
def away(db, request) -> Place:
    """Another place, alike but separate: grants here must not reach objects at home."""
    return Place(request)


@pytest.fixture
def make_group(db):
    def make(*members, name: str | None = None) -> Group:
        group = Group.objects.create(name=name or unique("group"))
        group.user_set.add(*members)
        return group

    return make


@pytest.fixture
def caller(make_user, make_group, grant):
    """caller(role=None, scope_obj=None, via="user") -> a user holding ``role`` on ``scope_obj``.

    ``via="group"`` grants the role to a group the user belongs to instead of to the user.
    Without a role the user holds no grant at all.
    """

    def make(role: str | None = None, scope_obj=None, *, via: str = "user"):
        user = make_user()
        if role is not None:
            principal = make_group(user) if via == "group" else user
            grant(principal, role, scope_obj)
        return user

    return make


@pytest.fixture
def make_role(db):
    """make_role("Name", ["hosts.view_cluster", ...]) -> a custom role, ready to grant."""

    def make(name: str, actions: list[str]) -> Role:
        role = Role.objects.create(name=name, description=f"{name} (test role)")
        role.actions.set([permission_for(action) for action in actions])
        ensure_grant_permissions(role)
        return role

    return make


@pytest.fixture
def token_client():
    """token_client("abc...") -> an APIClient sending ``Authorization: Token abc...``."""

    def make(token: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return make


def listed_ids(response) -> list:
    """The ids of the objects a paginated list response shows."""
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.fixture
def make_lease(db, make_user):
    def make(owner=None, **extra) -> Lease:
        start = timezone.now() + timedelta(days=1)
        return Lease.objects.create(
            name=extra.pop("name", unique("lease")),
            owner=owner or make_user(),
            start_date=extra.pop("start_date", start),
            end_date=extra.pop("end_date", start + timedelta(days=1)),
            **extra,
        )

    return make


def grant_count() -> int:
    """Every role grant stored, to users and to groups."""
    return sum(
        rows.objects.filter(permission__codename__startswith="role_").count()
        for rows in (UserObjectPermission, GroupObjectPermission)
    )

"""The demo administrator made by `make run`: a random password, printed once."""

import re
from io import StringIO

from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command


def run_demo_admin() -> str:
    out = StringIO()
    call_command("demo_admin", stdout=out)
    return out.getvalue()


def test_demo_admin_is_created_with_a_password_that_works(db):
    output = run_demo_admin()
    password = re.search(r"password: (\S+)", output).group(1)
    user = authenticate(username="admin", password=password)
    assert user is not None and user.is_superuser


def test_demo_admin_password_is_random_not_fixed(db):
    first = re.search(r"password: (\S+)", run_demo_admin()).group(1)
    get_user_model().objects.filter(username="admin").delete()
    second = re.search(r"password: (\S+)", run_demo_admin()).group(1)
    assert first != second
    assert len(first) >= 12


def test_demo_admin_prints_the_password_only_once(db):
    run_demo_admin()
    again = run_demo_admin()
    assert "password:" not in again
    assert "exists already" in again

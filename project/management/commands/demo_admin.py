"""Create the demo administrator once, with a random password printed only that once."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from project.access.accounts import username_holder


class Command(BaseCommand):
    help = "Create the demo superuser 'admin' with a random password (printed once)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        User = get_user_model()
        existing = username_holder(username)
        if existing is not None:
            # Any case: "Admin" would clash with "admin" (usernames are unique regardless of case).
            name = existing.username
            self.stdout.write(
                f"The administrator '{name}' exists already (its password was printed when it "
                f"was created; reset it with: manage.py changepassword {name})."
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username, f"{username}@localhost", password)
        bar = "=" * 64
        self.stdout.write(
            f"{bar}\nCreated the administrator.\n  username: {username}\n  password: {password}\n"
            f"This password is shown only now.\n{bar}"
        )

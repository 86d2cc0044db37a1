"""User accounts: usernames are unique regardless of case, and renaming a user is an admin's act.

"Alice" and "alice" cannot both exist: the log-in lockout counts failures by the lower-cased
username and grants name their user by username, so two such accounts would be confused. The
database enforces it (a unique index on ``lower(username)``); the API,
the admin console's forms and every other save check first, to answer with a field message.
Case is compared the way the database's ``lower()`` compares it (SQLite folds only ASCII).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Value
from django.db.models.functions import Lower

from project.access.permissions import holds

CHANGE_USERS = "auth.change_user"


def username_holder(username: str, *, other_than=None):
    """The user whose username equals ``username`` but for case (None: the name is free).

    ``other_than`` (a user) is left out, so that a user keeps their own name.
    """
    users = get_user_model()._default_manager.alias(key=Lower("username"))
    users = users.filter(key=Lower(Value(username)))
    if other_than is not None and other_than.pk is not None:
        users = users.exclude(pk=other_than.pk)
    return users.only("pk", "username").first()


def username_taken_message(existing: str) -> str:
    return f"A user named {existing!r} exists already; usernames ignore case."


def check_username_free(username: str, *, other_than=None) -> None:
    """Raise a ValidationError on ``username`` unless no other user has it in any case."""
    holder = username_holder(username, other_than=other_than)
    if holder is not None:
        raise ValidationError(
            {"username": username_taken_message(holder.username)}, code="username_taken"
        )


def may_rename(actor, user) -> bool:
    """Whether ``actor`` may change ``user``'s username: only whoever may change users (a
    system-wide grant), never a user on their own account alone."""
    return holds(actor, CHANGE_USERS, user)


RENAME_REFUSED = "Only an administrator who may change users can change a username."


def refuse_username_in_use(sender, instance, update_fields=None, **kwargs) -> None:
    """pre_save of the user model: every other way of saving a user (``createsuperuser``, the
    demo commands, a shell) is refused with a message rather than the index's IntegrityError."""
    if update_fields is not None and "username" not in update_fields:
        return
    check_username_free(instance.username, other_than=instance)

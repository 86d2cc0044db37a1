"""Usernames unique regardless of case: a unique index on lower(username) of the user table.

The user model belongs to django.contrib.auth, so the index is added here, through the schema
editor (an expression index on PostgreSQL and SQLite alike). A database that already holds
usernames differing only in case is refused with their names, to be renamed first.
"""

from django.conf import settings
from django.db import migrations
from django.db.models import Count, UniqueConstraint
from django.db.models.functions import Lower

INDEX = UniqueConstraint(Lower("username"), name="auth_user_username_lower_uniq")


def add_index(apps, schema_editor):
    user_model = apps.get_model(settings.AUTH_USER_MODEL)
    users = user_model._default_manager.using(schema_editor.connection.alias)
    clashes = (
        users.values(key=Lower("username"))
        .annotate(count=Count("pk"))
        .filter(count__gt=1)
        .values_list("key", flat=True)
    )
    if clashes:
        names = sorted(
            users.alias(key=Lower("username"))
            .filter(key__in=list(clashes))
            .values_list("username", flat=True)
        )
        raise RuntimeError(
            "Usernames must be unique regardless of case; rename all but one of each of these "
            f"before migrating: {', '.join(names)}."
        )
    schema_editor.add_constraint(user_model, INDEX)


def remove_index(apps, schema_editor):
    schema_editor.remove_constraint(apps.get_model(settings.AUTH_USER_MODEL), INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("project", "0005_event_feed_horizon"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(add_index, remove_index)]

"""The ticker moved from hosts.tasks to project.ticker: schedules stored under its old path run
the new one (ensure_schedules also writes it after every migrate)."""

from django.db import migrations

OLD, NEW = "hosts.tasks.tick", "project.ticker.tick"


def to_new_path(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=OLD).update(func=NEW)


def to_old_path(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=NEW).update(func=OLD)


class Migration(migrations.Migration):

    dependencies = [
        ("project", "0010_application_credentials"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(to_new_path, to_old_path)]

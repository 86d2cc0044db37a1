"""The event feed's horizon on PostgreSQL: the highest event id a reader may pass.

An event's id is taken at insert, before its transaction commits, so a transaction that runs
long can commit an id below one a reader has already passed. Before a transaction takes its
first event id, a trigger makes it hold a shared advisory lock (until it ends) whose key is the
highest id handed out so far: every id it takes is above that key. project_event_horizon()
reads the sequence, then those locks, and answers the smallest: no transaction still open
holds an id at or below it. The lock keys carry 0x4556 in their top bits (ids up to 2**47);
the sequence must keep CACHE 1, so that its last value is the highest id handed out.
SQLite has a single writer: ids commit in order, so it needs neither.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION project_event_hold_floor() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    floor bigint;
BEGIN
    -- Once per transaction: the setting is transaction-local, undone with a rolled-back
    -- savepoint, and the lock is held until the transaction ends.
    IF coalesce(current_setting('corral.event_floor', true), '') = '' THEN
        floor := coalesce(
            pg_sequence_last_value(pg_get_serial_sequence('project_event', 'id')::regclass), 0);
        PERFORM pg_advisory_xact_lock_shared((17750::bigint << 47) | floor);
        PERFORM set_config('corral.event_floor', floor::text, true);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER project_event_hold_floor BEFORE INSERT ON project_event
    FOR EACH STATEMENT EXECUTE FUNCTION project_event_hold_floor();

CREATE FUNCTION project_event_horizon() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    handed_out bigint;
    held bigint;
BEGIN
    -- The sequence first: an id handed out after this read is above it; one handed out
    -- before belongs to a transaction whose lock the next statement sees, unless it has ended.
    handed_out := coalesce(
        pg_sequence_last_value(pg_get_serial_sequence('project_event', 'id')::regclass), 0);
    -- The reader's own transaction is left out: it sees its own events.
    SELECT min(((l.classid::bigint & 32767) << 32) | l.objid::bigint) INTO held
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid::bigint >> 15 = 17750
       AND l.pid IS DISTINCT FROM pg_backend_pid();
    RETURN least(handed_out, held);
END $$;
"""

BACKWARD = """
DROP FUNCTION project_event_horizon();
DROP TRIGGER project_event_hold_floor ON project_event;
DROP FUNCTION project_event_hold_floor();
"""


def run(sql: str):
    def operation(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return operation


class Migration(migrations.Migration):
    dependencies = [
        ("project", "0004_loginfailure"),
    ]

    operations = [
        migrations.RunPython(run(FORWARD), run(BACKWARD)),
    ]

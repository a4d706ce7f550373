"""The database itself refuses a node in two live assignments over overlapping time.

PostgreSQL: an exclusion constraint over (node, [assigned_from, assigned_until)).
SQLite (the embedded default): BEFORE INSERT/UPDATE triggers with the same rule.
"""

from django.db import migrations

PG_FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    """
    ALTER TABLE leases_nodeassignment ADD CONSTRAINT node_not_leased_twice
    EXCLUDE USING gist (
        node_id WITH =,
        tstzrange(assigned_from, assigned_until, '[)') WITH &&
    ) WHERE (NOT void)
    """,
]
PG_BACKWARD = ["ALTER TABLE leases_nodeassignment DROP CONSTRAINT node_not_leased_twice"]

_SQLITE_CLASH = """
    NOT NEW.void AND EXISTS (
        SELECT 1 FROM leases_nodeassignment other
        WHERE other.node_id = NEW.node_id AND NOT other.void {exclude_self}
          AND (other.assigned_until IS NULL OR other.assigned_until > NEW.assigned_from)
          AND (NEW.assigned_until IS NULL OR NEW.assigned_until > other.assigned_from)
    )
"""
SQLITE_FORWARD = [
    f"""
    CREATE TRIGGER node_not_leased_twice_{event.lower()}
    BEFORE {event} ON leases_nodeassignment
    WHEN {_SQLITE_CLASH.format(exclude_self=exclude_self)}
    BEGIN
        SELECT RAISE(ABORT, 'node_not_leased_twice: this node is already leased in that period');
    END
    """
    for event, exclude_self in (("INSERT", ""), ("UPDATE", "AND other.id != NEW.id"))
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS node_not_leased_twice_insert",
    "DROP TRIGGER IF EXISTS node_not_leased_twice_update",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("leases", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        )
    ]

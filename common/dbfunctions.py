"""Database functions the ORM lacks."""

from django.db.models import BigIntegerField, Func, IntegerField, JSONField


class EpochHour(Func):
    """The start of a timestamp's UTC hour, in seconds since the epoch, as an integer.

    Grouping thousands of rows by it costs no per-row conversion back into aware
    datetimes, which ``Trunc`` does in Python (a month of hourly chart buckets: 5,760 rows,
    about 30 ms saved). Hours in a zone with a whole-hour offset are the same hours."""

    output_field = IntegerField()
    template = "(CAST(EXTRACT(EPOCH FROM date_trunc('hour', %(expressions)s)) AS bigint))"

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        return self.as_sql(
            compiler,
            connection,
            # %%%%s: the template's formatting and then the SQLite cursor's each halve it.
            template="(CAST(strftime('%%%%s', %(expressions)s) AS integer) / 3600 * 3600)",
            **extra,
        )


class SweptNodes(Func):
    """The nodes a sweep read: the keys of its parsed ``nodes`` object, sorted, as a JSON
    list (``gpulease_verify.sweep.hostnames``), computed in the database so that a list of
    runs does not fetch and decode every sweep's whole parsed result."""

    output_field = JSONField()
    template = (
        "(SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb) "
        "FROM jsonb_object_keys(coalesce(%(expressions)s -> 'nodes', '{}'::jsonb)) AS k)"
    )

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        return self.as_sql(
            compiler,
            connection,
            template=(
                "(SELECT coalesce(json_group_array(key), '[]') FROM "
                "(SELECT key FROM json_each(%(expressions)s, '$.nodes') ORDER BY key))"
            ),
            **extra,
        )


class JsonValuesSum(Func):
    """The sum of a JSON object's values (numbers), 0 for an empty object: a run's probe
    bytes over its nodes (``sent_bytes``), added up in the database."""

    output_field = BigIntegerField()
    template = "(SELECT coalesce(sum(v.value::bigint), 0) FROM jsonb_each_text(%(expressions)s) v)"

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        return self.as_sql(
            compiler,
            connection,
            template="(SELECT coalesce(sum(v.value), 0) FROM json_each(%(expressions)s) v)",
            **extra,
        )


class WholeSeconds(Func):
    """``max(0, int((end - start).total_seconds()))`` of two timestamps, in the database:
    whole seconds, the fraction dropped, never below zero."""

    arity = 2
    output_field = BigIntegerField()
    arg_joiner = " - "
    template = "GREATEST(0, FLOOR(EXTRACT(EPOCH FROM (%(expressions)s))))::bigint"

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        # django_timestamp_diff: Django's own SQLite function, the exact microseconds.
        return self.as_sql(
            compiler,
            connection,
            arg_joiner=", ",
            template="MAX(0, django_timestamp_diff(%(expressions)s) / 1000000)",
            **extra,
        )


class OctetLength(Func):
    """A text's length in bytes (UTF-8), not characters. PostgreSQL reads it from the
    stored value's header, without decompressing a TOASTed text."""

    output_field = BigIntegerField()
    function = "octet_length"

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        return self.as_sql(
            compiler, connection, template="length(CAST(%(expressions)s AS BLOB))", **extra
        )

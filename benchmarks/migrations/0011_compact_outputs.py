"""Raw outputs and standard error leave the run rows: each distinct text is stored once,
zstd-compressed, addressed by its SHA-256 (benchmarks.models.outputs); a run keeps the
hashes. Existing texts are moved over before their columns are dropped."""

import hashlib

import zstandard
from django.db import migrations, models


def move_texts(apps, schema_editor):
    ProbeRun = apps.get_model("benchmarks", "ProbeRun")
    RawOutput = apps.get_model("benchmarks", "RawOutput")
    compressor = zstandard.ZstdCompressor(level=3)
    runs = ProbeRun.objects.exclude(raw_output="", stderr="").only("pk", "raw_output", "stderr")
    batch: dict[str, str] = {}
    stderr_of: list[tuple[int, str]] = []

    def flush() -> None:
        RawOutput.objects.bulk_create(
            [
                RawOutput(sha256=key, data=compressor.compress(text.encode()), size=len(text.encode()))
                for key, text in batch.items()
            ],
            ignore_conflicts=True,
        )
        for pk, key in stderr_of:
            ProbeRun.objects.filter(pk=pk).update(stderr_sha256=key)
        batch.clear()
        stderr_of.clear()

    for run in runs.iterator(chunk_size=2000):
        for text in (run.raw_output, run.stderr):
            if text:
                batch[hashlib.sha256(text.encode()).hexdigest()] = text
        if run.stderr:
            stderr_of.append((run.pk, hashlib.sha256(run.stderr.encode()).hexdigest()))
        if len(batch) >= 2000:
            flush()
    flush()


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0010_partition_runs")]

    operations = [
        migrations.CreateModel(
            name="RawOutput",
            fields=[
                (
                    "sha256",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="SHA-256"
                    ),
                ),
                ("data", models.BinaryField(verbose_name="zstd-compressed text")),
                ("size", models.PositiveIntegerField(verbose_name="size (bytes)")),
            ],
            options={"verbose_name": "raw output", "verbose_name_plural": "raw outputs"},
        ),
        migrations.AddField(
            model_name="proberun",
            name="stderr_sha256",
            field=models.CharField(
                blank=True, max_length=64, verbose_name="standard error SHA-256"
            ),
        ),
        migrations.RunPython(move_texts, migrations.RunPython.noop),
        migrations.RemoveField(model_name="proberun", name="raw_output"),
        migrations.RemoveField(model_name="proberun", name="stderr"),
    ]

"""``lastmile flips RUN --detector D --condition C``: the videos whose verdict a condition flipped, named."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--detector", required=True, help="NAME, or NAME@VERSION where the run holds several versions")
@click.option("--condition", required=True, help="a condition of the run other than original")
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(0), help="flips listed per direction (0: all)"
)
@click.option(
    "--strips",
    is_flag=True,
    help="also draw each listed flip's frame strip into RUN/flips/ (the variant rendered again and checked "
    "against its recorded sha256)",
)
@click.option(
    "--fetch-urls",
    is_flag=True,
    help="with --strips: also fetch again a video the replay fetched over http(s) (from the hosts its "
    "run.json allows; off by default: a run folder may come from elsewhere)",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per flip, on its own line")
def flips(run_dir, detector, condition, limit, strips, fetch_urls, as_json) -> None:
    """List the videos whose verdict under CONDITION differs from their verdict on original, per direction (real ->
    generated, generated -> real), largest score change first."""
    from gateway.batch.results import ResultsError
    from gateway.evaluation.flips import DIRECTIONS, FlipsError, find_flips, paired_count
    from gateway.evaluation.provenance import read_run
    from gateway.evaluation.strips import RunRenderer, StripError

    try:
        rows, _info = read_run(run_dir)
        every = find_flips(rows, detector, condition)
    except (ResultsError, FlipsError) as exc:
        raise click.ClickException(f"{run_dir}: {exc}") from exc
    found = {d: every[d][:limit] if limit else every[d] for d in DIRECTIONS}
    listed = [f for d in DIRECTIONS for f in found[d]]
    drawn: list[tuple[str | None, str | None]] = []  # per listed flip, with --strips: its strip's path, or why none
    if strips and listed:
        try:
            drawn = [
                (None if s.path is None else str(run_dir / s.path), s.note)
                for s in RunRenderer(run_dir, fetch_urls=fetch_urls).strips(listed)
            ]
        except StripError as exc:
            raise click.ClickException(str(exc)) from exc
    if as_json:
        for i, f in enumerate(listed):
            extra = {"strip": drawn[i][0], "note": drawn[i][1]} if strips else {}
            click.echo(json.dumps(f.as_json() | extra))
        return
    paired, shown = paired_count(rows, detector, condition), iter(drawn)
    for d in DIRECTIONS:
        largest = f"; the largest {len(found[d])}:" if found[d] else ""
        click.echo(f"{d.replace('_to_', ' -> ')}: {len(every[d])} of {paired} videos flipped{largest}")
        for f in found[d]:
            click.echo(
                f"  {f.video_id:<28} {f.label or 'no label':<10} {f.verdicts:<20} score {f.original_score:+.3f} -> "
                f"{f.variant_score:+.3f} ({f.change:+.3f}; threshold {f.variant_threshold:+.3f})"
            )
            if strips:
                path, note = next(shown)
                click.echo(f"    strip: {path}" if path else f"    no strip: {note}")

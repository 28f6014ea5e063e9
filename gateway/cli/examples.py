"""``lastmile examples``: the example clips, manifest, conditions and configs, written out of the installed package
into a folder of the user's, so that every example of the README and the docs runs without the repository.

The wheel carries the repository's ``examples/`` folder as the package ``gateway.examples`` (``pyproject.toml``'s
``package-dir``); in a source checkout that is not installed, the folder itself is read."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

import gateway
from detectors.manifest import read_manifest

DEFAULT_DIR = Path("examples")  # the README's commands name examples/...: written here, they run as written
WHAT = {  # what each top-level entry is, for the summary (in this order)
    "manifest.jsonl": "the clips' labels: a manifest for lastmile replay and lastmile canary run",
    "videos": "the clips",
    "corpus.json": "how the clips were made (the proxy corpus's notice and settings)",
    "conditions.yaml": "conditions of your own: two more and a sweep (lastmile transform, replay --conditions-file)",
    "gateway.yaml": "every gateway setting, with its default and what it does",
    "monitor.yaml": "every monitor setting, with its default and what it does",
    "byo": "a detector of your own: export.py (needs the train extra) and its card",
}


class ExamplesMissing(click.ClickException):
    """The installed package holds no examples (a broken install)."""


def source() -> Path:
    """The folder the examples are read from: the installed package's, else a source checkout's."""
    package = Path(gateway.__file__).resolve().parent
    for folder in (package / "examples", package.parent / "examples"):
        if (folder / "manifest.jsonl").is_file():
            return folder
    raise ExamplesMissing(f"no examples in {package / 'examples'}: reinstall lastmile-gateway")


def files(root: Path) -> list[Path]:
    """The example files under ``root``, relative to it (caches and compiled files left out)."""
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and p.name != "__init__.py"
    )


@click.command("examples")
@click.argument("folder", required=False, default=DEFAULT_DIR, type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="overwrite example files already in FOLDER (other files are left alone)")
def examples(folder: Path, force: bool) -> None:
    """Write the example clips, manifest, conditions and configs into FOLDER (default: ./examples), where the
    README's commands find them."""
    root = source()
    if folder.resolve() == root.resolve():  # (a source checkout's own examples/: nothing to write, or to overwrite)
        raise click.ClickException(f"{folder} is where the examples are read from: name another folder")
    names = files(root)
    there = [n for n in names if (folder / n).exists()]
    if there and not force:
        raise click.ClickException(
            f"{folder / there[0]} exists ({len(there)} of the {len(names)} example files are there): pass --force to "
            "overwrite them, or name another folder"
        )
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / name, folder / name)
    rows = read_manifest(folder / "manifest.jsonl")
    reals = sum(r.label == "real" for r in rows)
    click.echo(f"wrote {len(names)} files to {folder}/:")
    width = max(len(str(folder / n)) for n in WHAT) + 2
    for top, what in WHAT.items():
        if (folder / top).exists():
            shown = f"{folder / top}{'/' if (folder / top).is_dir() else ''}"
            click.echo(f"  {shown:<{width}}{what}")
    click.echo(
        f"The {len(rows)} clips ({reals} real, {len(rows) - reals} generated) are a proxy corpus: synthetic scenes and "
        "pseudo-generators, a proxy for AI-generated video, not AI-generated video."
    )
    click.echo(f"Next: lastmile replay {folder / 'manifest.jsonl'} --profile throughput --out runs/example")

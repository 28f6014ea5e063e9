"""The model repository: one folder per detector, Triton's layout (``NAME/1/model.onnx``, ``NAME/card.yaml``).

The reference detectors are committed in ``triton_models/`` so inference never needs torch; ``lastmile
detectors build`` rebuilds them, and ``lastmile detectors add`` installs a user's ONNX model after checking
its card against the graph. Triton's configs beside a model are written by :mod:`detectors.serving.config`.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from detectors.card import ModelCard, check_card_against_model, dump_card, load_card
from detectors.errors import CardError


def _default_repo() -> Path:
    """``$LASTMILE_REPO``, else the installed ``triton_models`` package, else the source tree's folder."""
    import importlib.util
    import os

    if os.environ.get("LASTMILE_REPO"):
        return Path(os.environ["LASTMILE_REPO"])
    spec = importlib.util.find_spec("triton_models")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "triton_models"


DEFAULT_REPO = _default_repo()
CARD_FILE = "card.yaml"
MODEL_FILE = "model.onnx"


@dataclass(frozen=True)
class Installed:
    card: ModelCard
    model_path: Path

    @property
    def model_sha256(self) -> str:
        return hashlib.sha256(self.model_path.read_bytes()).hexdigest()


def repository_path(repo: str | Path | None = None) -> Path:
    return Path(repo) if repo else DEFAULT_REPO


def list_detectors(repo: str | Path | None = None) -> dict[str, Installed]:
    """Every detector in the repository that has a card and a version-1 model."""
    root = repository_path(repo)
    found = {}
    for card_path in sorted(root.glob(f"*/{CARD_FILE}")):
        model = card_path.parent / "1" / MODEL_FILE
        if model.exists():
            card = load_card(card_path)
            found[card.name] = Installed(card, model)
    return found


def get_detectors(names: str | list[str], repo: str | Path | None = None) -> list[Installed]:
    """Resolve ``"all"`` or comma-separated names; raise :class:`CardError` naming what is missing."""
    have = list_detectors(repo)
    wanted = (
        list(have) if names == "all" else [n.strip() for n in (names.split(",") if isinstance(names, str) else names)]
    )
    missing = [n for n in wanted if n not in have]
    if missing:
        hint = "" if have else " (the repository is empty: run `lastmile detectors build`)"
        raise CardError(f"unknown detector(s) {missing}; installed: {sorted(have)}{hint}")
    return [have[n] for n in wanted]


def install(
    model_path: str | Path, card: ModelCard, repo: str | Path | None = None, overwrite: bool = False
) -> Installed:
    """Check ``card`` against ``model_path`` (names, shapes, dtypes, a dummy batch), then copy both in."""
    check_card_against_model(card, model_path)
    folder = repository_path(repo) / card.name
    if folder.exists() and not overwrite:
        raise CardError(f"{folder} exists; pass overwrite=True (--force) to replace it")
    (folder / "1").mkdir(parents=True, exist_ok=True)
    target = folder / "1" / MODEL_FILE
    if Path(model_path).resolve() != target.resolve():
        shutil.copyfile(model_path, target)
    dump_card(card, folder / CARD_FILE)
    return Installed(card, target)


def install_from_files(
    model_path: str | Path, card_path: str | Path, repo: str | Path | None = None, overwrite: bool = False
) -> Installed:
    return install(model_path, load_card(card_path), repo, overwrite)

"""The model repository: one folder per detector, Triton's layout (``NAME/1/model.onnx``, ``NAME/card.yaml``), and
beside it any further version of the same detector (``NAME/versions/VERSION/``, the same layout; Triton reads
numbered folders only, so it serves each detector's default version).

Two roots: the reference detectors shipped read-only in the package (``triton_models/``, so inference never
needs torch; ``lastmile detectors build`` rebuilds them), and the user repository (``--repo``,
``$LASTMILE_REPO``, or the per-user data directory), where ``lastmile detectors add`` installs a user's ONNX
model after checking its card against the graph and composing it to the gateway's contract where needed.
Triton's configs beside a model are written by :mod:`detectors.serving.config`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from detectors.card import ModelCard, Threshold, check_card_against_model, dump_card, load_card
from detectors.errors import CardError, UnknownDetector
from detectors.names import split_key


def _shipped_repo() -> Path:
    """The reference detectors shipped with the package (read-only: inside site-packages once installed)."""
    import importlib.util

    spec = importlib.util.find_spec("triton_models")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "triton_models"


def user_repo(repo: str | Path | None = None) -> Path:
    """Where added detectors go: ``repo``, else ``$LASTMILE_REPO``, else the per-user data directory
    (``$XDG_DATA_HOME/lastmile/models``, by default ``~/.local/share/lastmile/models``): never the package."""
    import os

    if repo:
        return Path(repo)
    if os.environ.get("LASTMILE_REPO"):
        return Path(os.environ["LASTMILE_REPO"])
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "lastmile" / "models"


SHIPPED_REPO = _shipped_repo()
CARD_FILE = "card.yaml"
MODEL_FILE = "model.onnx"
VERSIONS_DIR = "versions"


@dataclass(frozen=True)
class Installed:
    card: ModelCard
    model_path: Path
    origin: str = "user"  # "shipped" (read-only, in the package) or "user" (the user repository)
    default: bool = True  # the detector's folder's own card; False for one under ``versions/``

    @property
    def folder(self) -> Path:
        return self.model_path.parent.parent

    @property
    def key(self) -> str:
        """How a run names it: the detector's name for its default version, ``NAME@VERSION`` for another one."""
        return self.card.name if self.default else f"{self.card.name}@{self.card.version}"

    @property
    def model_sha256(self) -> str | None:
        """The served graph's sha256; for a chat detector, its request's (the model, the prompt template and the
        sampling settings: :func:`detectors.chat.prompts.request_sha256`); None for a remote detector (the server
        holds the graph)."""
        if self.card.chat is not None:
            from detectors.chat.prompts import load_template, request_sha256

            return request_sha256(self.card, load_template(self.card.chat.prompt, self.folder))
        if self.card.remote is not None and not self.model_path.exists():
            return None
        return hashlib.sha256(self.model_path.read_bytes()).hexdigest()


def repository_path(repo: str | Path | None = None) -> Path:
    """The user repository (where adding, building into and staging write); see :func:`user_repo`."""
    return user_repo(repo)


def _scan(root: Path, origin: str) -> dict[str, Installed]:
    found = {}
    for pattern, default in ((f"*/{CARD_FILE}", True), (f"*/{VERSIONS_DIR}/*/{CARD_FILE}", False)):
        for card_path in sorted(root.glob(pattern)):
            model = card_path.parent / "1" / MODEL_FILE
            card = load_card(card_path)
            # without a model file, the card is all there is for a detector served elsewhere
            if model.exists() or card.served_elsewhere:
                inst = Installed(card, model, origin, default)
                if not default:
                    _check_version(inst, found.get(card.name), card_path)
                found[inst.key] = inst
    return found


def _check_version(inst: Installed, main: Installed | None, card_path: Path) -> None:
    """A further version sits beside its detector's default one, under its own version."""
    if main is None or main.folder != inst.folder.parent.parent:
        raise CardError(f"{card_path}: a version's card names its folder's detector, not {inst.card.name!r}")
    if inst.card.version == main.card.version or inst.folder.name != inst.card.version:
        raise CardError(
            f"{card_path}: a further version's folder is named for its card's version, which differs from the "
            f"default's ({main.card.version!r}); got folder {inst.folder.name!r}, version {inst.card.version!r}"
        )


def list_versions(repo: str | Path | None = None) -> dict[str, Installed]:
    """Every version of the shipped detectors and the user repository's, by :attr:`Installed.key` (``NAME`` for a
    detector's default version, ``NAME@VERSION`` for a further one; the user repository's wins)."""
    shipped = _scan(SHIPPED_REPO, "shipped")
    root = user_repo(repo)
    user = _scan(root, "user") if root.resolve() != SHIPPED_REPO.resolve() else {}
    return {**shipped, **user}


def list_detectors(repo: str | Path | None = None) -> dict[str, Installed]:
    """The shipped detectors and the user repository's, each in its default version, by name (a user detector of
    the same name wins)."""
    return {key: inst for key, inst in list_versions(repo).items() if inst.default}


def get_detectors(names: str | list[str], repo: str | Path | None = None) -> list[Installed]:
    """Resolve ``"all"`` (every detector's default version) or comma-separated ``NAME`` or ``NAME@VERSION``; raise
    :class:`UnknownDetector` naming what is missing, :class:`CardError` for a name given twice."""
    have = list_versions(repo)
    if names == "all":
        return [inst for inst in have.values() if inst.default]
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names)]
    found = {n: _find(have, n) for n in wanted}
    missing = [n for n, inst in found.items() if inst is None]
    if missing:
        hint = "" if have else " (the repository is empty: run `lastmile detectors build`)"
        raise UnknownDetector(f"unknown detector(s) {missing}; installed: {sorted(have)}{hint}")
    keys = [inst.key for inst in found.values()]
    if len(set(keys)) < len(keys) or len(found) < len(wanted):
        raise CardError(f"a detector is named twice in {','.join(wanted)!r}")
    return list(found.values())


def _find(have: dict[str, Installed], text: str) -> Installed | None:
    """The installed detector ``NAME`` or ``NAME@VERSION`` names (a default version answers to both)."""
    name, version = split_key(text)
    if version is None:
        return have.get(name)
    return next((i for i in have.values() if i.card.name == name and i.card.version == version), None)


def prepare(model_path: str | Path, card: ModelCard) -> tuple[bytes, ModelCard]:
    """What installing would write: the served graph's bytes (composed when the card's contract is not the
    gateway's own) and its card, both checked (a dummy batch included). Raises :class:`CardError`."""
    import onnx

    from detectors.compose import compose_model

    try:
        model = onnx.load(str(model_path))
    except Exception as exc:  # onnx raises DecodeError and friends for files that are not ONNX
        raise CardError(f"{model_path} is not a loadable ONNX model: {exc}") from exc
    if card.needs_composition:
        model, card = compose_model(model, card)
    data = model.SerializeToString()
    check_card_against_model(card, data)
    return data, card


def install(
    model_path: str | Path,
    card: ModelCard,
    repo: str | Path | None = None,
    overwrite: bool = False,
    beside: bool = False,
) -> Installed:
    """Check ``card`` against ``model_path``, compose where needed, then write both into the user repository: as the
    detector's default version, or with ``beside`` as a further version next to the installed default one."""
    data, card = prepare(model_path, card)
    folder = user_repo(repo) / card.name
    if beside:
        main = _scan(user_repo(repo), "user").get(card.name)
        if main is None or main.card.version == card.version:
            have = "none" if main is None else main.card.version
            raise CardError(
                f"{card.name} {card.version}: a version goes beside another installed one (default: {have})"
            )
        folder = folder / VERSIONS_DIR / card.version
    if folder.exists() and not overwrite:
        raise CardError(f"{folder} exists; pass overwrite=True (--force) to replace it")
    (folder / "1").mkdir(parents=True, exist_ok=True)
    target = folder / "1" / MODEL_FILE
    if Path(model_path).resolve() != target.resolve():
        target.write_bytes(data)
    dump_card(card, folder / CARD_FILE)
    return Installed(card, target, "user", default=not beside)


def install_remote(
    card: ModelCard, repo: str | Path | None = None, overwrite: bool = False, card_dir: str | Path | None = None
) -> Installed:
    """Record a detector served elsewhere (a card with ``remote`` or ``chat``): nothing to check locally until a
    runtime starts. A chat card's own prompt template (a file beside the card, in ``card_dir``) is copied in beside
    the stored card, so the record does not depend on where it was added from."""
    if not card.served_elsewhere:
        raise CardError(f"{card.name}: without a model file the card must name a server (remote: or chat:)")
    folder = user_repo(repo) / card.name
    if folder.exists() and not overwrite:
        raise CardError(f"{folder} exists; pass overwrite=True (--force) to replace it")
    template = None
    if card.chat is not None:
        from detectors.chat.prompts import load_template

        template = load_template(card.chat.prompt, Path(card_dir) if card_dir else None)
        key_file = card.chat.api_key_file
        if key_file and card_dir and not Path(key_file).expanduser().is_absolute():  # (the key stays where it is)
            absolute = str((Path(card_dir) / key_file).resolve())
            card = card.model_copy(update={"chat": card.chat.model_copy(update={"api_key_file": absolute})})
    folder.mkdir(parents=True, exist_ok=True)
    if template is not None and template.path is not None:
        name = template.path.name
        if template.path.resolve() != (folder / name).resolve():
            (folder / name).write_text(template.path.read_text())
        card = card.model_copy(update={"chat": card.chat.model_copy(update={"prompt": name})})
    dump_card(card, folder / CARD_FILE)
    return Installed(card, folder / "1" / MODEL_FILE, "user")


def install_from_files(
    model_path: str | Path, card_path: str | Path, repo: str | Path | None = None, overwrite: bool = False
) -> Installed:
    return install(model_path, load_card(card_path), repo, overwrite)


def set_threshold(inst: Installed, threshold: Threshold, repo: str | Path | None = None) -> Installed:
    """``inst`` deciding at ``threshold``, written into the user repository: a user detector's card is rewritten
    in place; a shipped or other repository's one is copied there first (its graph, checked against its card, or a
    remote detector's card alone; the user repository's copy wins by name), the package itself never written.
    Raises :class:`CardError` where the copy's graph does not load or check."""
    card = inst.card.model_copy(update={"threshold": threshold})
    folder = user_repo(repo) / card.name
    if not inst.default:
        folder = folder / VERSIONS_DIR / card.version
    if inst.origin == "user" and inst.folder.resolve() == folder.resolve():
        dump_card(card, folder / CARD_FILE)
        return Installed(card, inst.model_path, "user", inst.default)
    if card.served_elsewhere and inst.default:
        return install_remote(card, repo, overwrite=True, card_dir=inst.folder)
    if not inst.default and (card.served_elsewhere or card.name not in _scan(user_repo(repo), "user")):
        raise CardError(
            f"{inst.key}: a version beside the default one is calibrated in the repository that holds both; "
            f"install the default and this version there first (`lastmile detectors add --beside`)"
        )
    return install(inst.model_path, card, repo, overwrite=True, beside=not inst.default)

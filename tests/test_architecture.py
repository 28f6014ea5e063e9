"""docs/architecture.md is the map of the code: every module is named in the section of its package (or of the
nearest package above it that the map lists), so a module added without a place on the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("transforms", "detectors", "gateway")
HEADER = re.compile(r"^([a-z_]+(?:/[a-z_]+)*/)\s")


def sections() -> dict[str, str]:
    """The map's code block: each package line and its indented continuation, by the package's path."""
    block = (ROOT / "docs/architecture.md").read_text().split("```", 2)[1]
    out: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if match := HEADER.match(line):
            current = match.group(1)
            out[current] = line
        elif current is not None and line.startswith(" "):
            out[current] += "\n" + line
    return out


def section_of(module: Path, listed: dict[str, str]) -> str | None:
    parts = module.parts[:-1]
    for i in range(len(parts), 0, -1):
        if (key := "/".join(parts[:i]) + "/") in listed:
            return key
    return None


def test_every_module_is_named_in_its_packages_section():
    listed = sections()
    assert {"transforms/", "detectors/", "gateway/core/", "gateway/bus/"} <= set(listed)
    missing = []
    for module in sorted(p.relative_to(ROOT) for top in PACKAGES for p in (ROOT / top).rglob("*.py")):
        if module.name == "__init__.py":
            continue
        text = listed.get(section_of(module, listed) or "", "")
        # its file name, or its stem in a list of them ("runtimes/ (base, embedded, ...)")
        if not re.search(rf"(?<![\w/]){re.escape(module.stem)}(\.py)?(?!\w)", text):
            missing.append(str(module))
    assert missing == [], f"not on the map (docs/architecture.md): {missing}"


def test_the_map_names_no_package_that_is_not_there():
    assert [key for key in sections() if not (ROOT / key).is_dir()] == []

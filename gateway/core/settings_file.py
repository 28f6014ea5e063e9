"""A settings model written out as YAML a user can start from: every field with its value, and a comment
from the field's description where it has one."""

from __future__ import annotations

import json

import yaml
from pydantic import BaseModel


def commented_yaml(model: BaseModel, header: str = "") -> str:
    """``model`` as YAML, nested models as blocks, each field commented with its description."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += _fields(model, json.loads(model.model_dump_json()), 0)
    return "\n".join(lines) + "\n"


def _fields(model: BaseModel, values: dict, depth: int) -> list[str]:
    out, pad = [], "  " * depth
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out.append(f"{pad}{name}:")
            out += _fields(value, values[name], depth + 1)
            continue
        text = yaml.safe_dump({name: values[name]}, default_flow_style=True, width=1_000).strip()
        text = text[1:-1] if text.startswith("{") else text  # {key: value} -> key: value
        comment = f"  # {info.description}" if info.description else ""
        out.append(f"{pad}{text}{comment}")
    return out

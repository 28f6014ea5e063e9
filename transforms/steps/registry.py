"""The step kinds a condition may use, by name: the built-in ones (:data:`BUILT_IN`, in the order the spec's
error messages list them) and any registered at run time. The spec's step type (:class:`RegisteredStep`) is the
discriminated union (on ``kind``) of the kinds registered when a value is validated, so a kind registered later
is accepted everywhere a step is, and is refused again once it is unregistered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import Field, GetCoreSchemaHandler, TypeAdapter
from pydantic_core import core_schema

from transforms.errors import SpecError
from transforms.steps import badge, fps, h264, reorder, scale, speed, trim, vp9
from transforms.steps.kind import StepKind, StepSpec

BUILT_IN: tuple[StepKind, ...] = (
    vp9.KIND,
    scale.KIND,
    fps.KIND,
    badge.KIND,
    h264.KIND,
    trim.KIND,
    speed.KIND,
    reorder.KIND,
)


class StepRegistry:
    """Step kinds by name, in the order they were registered."""

    def __init__(self, kinds: Iterable[StepKind]) -> None:
        self._kinds: dict[str, StepKind] = {}
        self._adapter: TypeAdapter[StepSpec] | None = None
        for kind in kinds:
            self.register(kind)

    def register(self, kind: StepKind) -> None:
        """Add ``kind``; its name must be new, and its model's ``kind`` a literal of that name (the union's tag)."""
        field = kind.model.model_fields["kind"]
        if get_origin(field.annotation) is not Literal or get_args(field.annotation) != (field.default,):
            raise SpecError(f"{kind.model.__name__}: declare its kind as kind: Literal['name'] = 'name'")
        if kind.name in self._kinds:
            raise SpecError(f"step kind {kind.name!r} is already registered")
        self._kinds[kind.name] = kind
        self._adapter = None

    def unregister(self, name: str) -> None:
        del self._kinds[name]
        self._adapter = None

    @contextmanager
    def registered(self, kind: StepKind) -> Iterator[StepKind]:
        """``kind`` registered for the ``with`` block only (a test's own kind, say)."""
        self.register(kind)
        try:
            yield kind
        finally:
            self.unregister(kind.name)

    def get(self, name: str) -> StepKind:
        kind = self._kinds.get(name)
        if kind is None:
            raise SpecError(f"unknown step kind {name!r}; known: {list(self._kinds)}")
        return kind

    def find(self, name: str) -> StepKind | None:
        """The kind named ``name``, or None (a node that no step kind makes: the normaliser, say)."""
        return self._kinds.get(name)

    def kinds(self) -> tuple[StepKind, ...]:
        return tuple(self._kinds.values())

    def models(self) -> tuple[type[StepSpec], ...]:
        return tuple(kind.model for kind in self._kinds.values())

    def union(self) -> Any:
        """The registered spec models as a discriminated union on ``kind``, as pydantic reads it."""
        return Annotated[Union[self.models()], Field(discriminator="kind")]  # noqa: UP007 - a tuple of types

    def validate(self, value: object) -> StepSpec:
        """``value`` (a mapping, or a step) as the step of its kind; pydantic's errors name the kinds allowed."""
        if self._adapter is None:
            self._adapter = TypeAdapter(self.union())
        return self._adapter.validate_python(value)


STEPS = StepRegistry(BUILT_IN)


class RegisteredStep:
    """Pydantic metadata: a step of any kind registered in ``registry`` at the time a value is validated."""

    def __init__(self, registry: StepRegistry) -> None:
        self.registry = registry

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.registry.validate, json_schema_input_schema=handler.generate_schema(self.registry.union())
        )

    def member_models(self) -> tuple[type[StepSpec], ...]:
        """The models a step may be now (transforms.support.config_errors names the keys they allow)."""
        return self.registry.models()

"""Every string a caller can send in a request body refuses control characters, line
separators and bidirectional overrides (docs/security.md: names refuse them with 422): each
body the API declares is walked down to its string fields, and each field is given each
hostile character on its own."""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from api.openapi_dump import document
from services.formats import PRINTABLE, FreeText, VolumeRef
from services.plans.schemas import PlanCreate

HOSTILE = ["\x00", "\t", "\n", "\r", "\x1b[2J", "\x7f", "\x85", "\x9b", "\u2028", "\u2029",
           "\u202a", "\u202e", "\u2066", "\u2069", "\ud800", "\u200b", "\u2060", "\u2063",
           "\ufeff", "\ufff9", "\U000e0001", "\U000e0041", "\U000e007f"]
"""NUL, tab, newline, CR, a terminal escape, DEL, C1 NEL and CSI, the line and paragraph
separators, the bidi embeddings, overrides and isolates, a lone surrogate, the zero-width
space, the word joiner, an invisible operator, the zero-width no-break space, an
interlinear annotation mark, and tag characters (the language tag, a tag 'A', the cancel
tag)."""

NOT_OURS = {
    "SignIn": "the portal's sign-in (api/routers/session.py) passes the user's Keystone "
              "name and password on to Keystone, which decides what they may hold",
}


def _body_models() -> dict[str, type[BaseModel]]:
    """Every model the OpenAPI document names as a request body, by its schema name."""
    doc = json.loads(document())
    names: set[str] = set()
    for operations in doc["paths"].values():
        for operation in operations.values():
            content = (operation.get("requestBody") or {}).get("content", {})
            for media in content.values():
                schema = media["schema"]
                for ref in [schema, *schema.get("anyOf", [])]:
                    if "$ref" in ref:
                        names.add(ref["$ref"].rsplit("/", 1)[1])
    models = {m.__name__: m for m in _subclasses(BaseModel)
              if m.__module__.startswith(("services.", "api."))}
    assert names <= models.keys(), names - models.keys()
    return {name: models[name] for name in sorted(names)}


def _subclasses(cls: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _string_paths(annotation: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """The paths (field names, 0 for a list's item) of every string inside `annotation`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _string_paths(get_args(annotation)[0], path)
    elif origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            yield from _string_paths(arg, path)
    elif origin is list:
        yield from _string_paths(get_args(annotation)[0], (*path, 0))
    elif origin is Literal or (isinstance(annotation, type) and issubclass(annotation,
                                                                           enum.Enum)):
        return  # one of a few fixed values
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            yield from _string_paths(field.annotation, (*path, name))
    elif annotation is str:
        yield path


def _cases() -> Iterator[Any]:
    for name, model in _body_models().items():
        if name in NOT_OURS:
            continue
        for path in dict.fromkeys(_string_paths(model, ())):
            yield pytest.param(model, path, id=f"{name}.{'.'.join(map(str, path))}")


def _body(path: tuple[Any, ...], value: str) -> Any:
    """The smallest body that puts `value` at `path`; a list holds a good item first."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head == 0:
        inner = _body(rest, value)
        return ["ok", inner] if not rest else [inner]
    return {head: _body(rest, value)}


def _refused_at(model: type[BaseModel], path: tuple[Any, ...], value: str) -> bool:
    """Whether validating the body refuses it at `path` (or at a field on the way there:
    a list's own validator)."""
    try:
        model.model_validate(_body(path, value))
    except ValidationError as exc:
        fields = [p for p in path if p != 0]
        for error in exc.errors():
            named = [p for p in error["loc"] if not isinstance(p, int)]
            if named and fields[:len(named)] == named:
                return True
    return False


@pytest.mark.parametrize(("model", "path"), list(_cases()))
def test_every_string_field_refuses_control_and_bidi_characters(
        model: type[BaseModel], path: tuple[Any, ...]) -> None:
    accepted = [c for c in HOSTILE if not _refused_at(model, path, f"a{c}b")]
    assert not accepted, f"{model.__name__}.{'.'.join(map(str, path))} accepts {accepted!r}"


def test_the_walk_finds_the_free_text_fields() -> None:
    found = {case.id for case in _cases()}
    for field in ("PlanCreate.name", "PlanCreate.description", "PlanUpdate.description",
                  "PlanCreate.volumes.0", "PlanCreate.rules.0.rrule",
                  "RestoreCreate.new_volume.description", "RestoreCreate.new_volume.name",
                  "RestoreCreate.new_volume.volume_type", "GroupRestoreCreate.name_prefix",
                  "BackupCreate.volume", "PlanCreate.offsite.target", "WebhookCreate.url"):
        assert field in found


@pytest.mark.parametrize("text", ["nightly", "Sauvegarde nocturne — base de données",
                                  "גיבוי לילי\u200f", "バックアップ", "db 🐘 backups", "",
                                  "پشتیبان\u200cگیری", "क्\u200dष", "👩\u200d💻 dev",
                                  "🇩🇪 Sicherung"])
def test_ordinary_text_in_any_script_is_accepted(text: str) -> None:
    class Named(BaseModel):
        name: FreeText

    assert Named(name=text).name == text


def test_a_cinder_id_is_one_volume_in_any_case() -> None:
    class Ref(BaseModel):
        volume: VolumeRef

    upper = "3F0C6A2E-9B1D-4C55-8E8A-0D6F1E2B7C41"
    assert Ref(volume=upper).volume == upper.lower()
    assert Ref(volume="ceph-a/volumes/Demo").volume == "ceph-a/volumes/Demo"
    variants = [upper, upper.lower(), upper[:8].lower() + upper[8:]]
    with pytest.raises(ValidationError, match="listed more than once"):
        PlanCreate(name="p", volumes=variants, rules=[{"cron": "0 2 * * *"}])


def test_the_pattern_is_the_one_the_api_document_declares() -> None:
    doc = json.loads(document())
    name = doc["components"]["schemas"]["PlanCreate"]["properties"]["name"]
    assert name["pattern"] == PRINTABLE

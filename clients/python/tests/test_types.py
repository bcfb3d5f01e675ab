"""types.py is generated from the server's OpenAPI document by generate_types.py: the committed file
must be what the generator writes now (its --check mode), and it must keep the names the client, its
README and its users import."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest

from redial_client import errors, types

GENERATOR = Path(__file__).resolve().parent.parent / "generate_types.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("redial_generate_types", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_types_py_is_generated_from_openapi_json() -> None:
    gen = load_generator()
    run = subprocess.run([sys.executable, str(GENERATOR), "--check"],
                         capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        pytest.fail(
            "src/redial_client/types.py is stale against crates/redial-server/src/openapi.json (or "
            f"was edited by hand): regenerate it with `{gen.COMMAND}` from the repository root and "
            f"commit the result.\n{run.stderr}{run.stdout[:6000]}"
        )


def test_check_mode_fails_on_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    gen = load_generator()
    stale = tmp_path / "types.py"
    stale.write_text(gen.TARGET.read_text(encoding="utf-8").replace("    stalls: int\n", ""))
    monkeypatch.setattr(gen, "TARGET", stale)
    assert gen.main(["--check"]) == 1
    out = capsys.readouterr()
    assert "-    stalls: int" not in out.out and "+    stalls: int" in out.out
    assert gen.COMMAND in out.err


def test_the_names_the_client_imports_are_kept() -> None:
    # What the client's modules, __init__.py, the README and users of the hand-written types.py
    # imported from it: a rename in the generator's NAMES would break them.
    kept = """
        JobState DeadCategory Headers RequestInput CallbackOn CallbackInput CallbackView JobInput
        RequestView Attempt Job JobPage BatchResult Dismissed Affected Operation DeadLetterFilter
        QueueStateCount EndpointStateCount Stats HandPause BreakerChange Endpoint OrderingOnDead
        Queue OrderingKeyLine OrderingKeys DeadGroup DeadGroups JobSide ReplayPreviewItem
        ReplayPreview DeadPattern DeadPatterns Alert JobFilter ScheduleInput Schedule EventKind Event EventPage
        CallbackResponse CallbackJob CallbackEvent
    """.split()
    assert [name for name in kept if not hasattr(types, name)] == []


def test_every_typeddict_resolves_at_run_time() -> None:
    found = 0
    for name, value in vars(types).items():
        if isinstance(value, type) and typing.is_typeddict(value):
            typing.get_type_hints(value, include_extras=True)  # raises on an unknown name
            found += 1
    assert found > 50
    # types.py does without `from __future__ import annotations`: NotRequired shows at run time.
    assert "deduplicated" in types.Job.__optional_keys__
    assert "id" in types.Job.__required_keys__


def test_the_error_codes_agree_with_errors_py() -> None:
    # errors.py keeps its own list (a server test reads it); the document's must be the same.
    assert typing.get_args(types.ErrorCode) == typing.get_args(errors.ErrorCode)


def test_the_mapping_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = load_generator()
    monkeypatch.setattr(gen, "NAMES", {})  # they name shapes of the real document
    monkeypatch.setattr(gen, "QUERIES", {})
    spec = {"info": {"version": "9"}, "components": {"schemas": {
        "Thing": {
            "type": "object", "description": "A thing.", "required": ["id", "state", "child"],
            "properties": {
                "id": {"type": "string"},
                "state": {"type": "string", "enum": ["on", "off"], "description": "Its state."},
                "note": {"type": ["string", "null"]},
                "child": {"oneOf": [{"$ref": "#/components/schemas/Child"}, {"type": "null"}]},
                "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
                "pair": {"type": "object", "properties": {"from": {"type": "string"}}},
            },
        },
        "Child": {"type": "object", "properties": {"states": {
            "type": "array", "items": {"type": "string", "enum": ["on", "off"]}}}},
    }}}
    text = gen.generate(json.dumps(spec), '__all__ = ["Extra"]\n')
    for line in [
        'ThingState = Literal["on", "off"]',
        'class Thing(TypedDict):\n    """A thing."""\n\n    id: str\n',
        '    state: ThingState\n    """Its state."""\n',
        "    note: NotRequired[str | None]\n",
        "    child: Child | None\n",
        "    tags: NotRequired[dict[str, int]]\n",
        "    pair: NotRequired[ThingPair]\n",
        'ThingPair = TypedDict(\n    "ThingPair",\n    {\n        "from": NotRequired[str],\n',
        "    states: NotRequired[list[ThingState]]\n",
        "from ._types_extra import (  # noqa: E402\n    Extra as Extra,\n)",
    ]:
        assert line in text, line
    # Each name is defined before it is used: Child and ThingPair before Thing.
    assert text.index("class Child") < text.index("class Thing") > text.index("ThingPair =")

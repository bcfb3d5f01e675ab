"""client.py is generated from async_client.py by unasync.py (the one source of `Redial` and
`AsyncRedial`): the committed client.py must be what the generator writes now, and the two clients
must keep the same methods."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import pytest

from redial_client import AsyncRedial, Redial

GENERATOR = Path(__file__).resolve().parent.parent / "unasync.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("redial_unasync", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_client_py_is_generated_from_async_client_py() -> None:
    unasync = load_generator()
    expected = unasync.generate(unasync.SOURCE.read_text(encoding="utf-8"))
    actual = unasync.TARGET.read_text(encoding="utf-8")
    if actual != expected:
        pytest.fail(
            "client.py is not what unasync.py makes of async_client.py (edit async_client.py, not "
            f"client.py); regenerate it with `{unasync.COMMAND}`:\n"
            + unasync.diff(expected, actual)[:6000]
        )


def test_both_clients_have_the_same_methods() -> None:
    renamed = {"__aenter__": "__enter__", "__aexit__": "__exit__", "aclose": "close"}

    def methods(cls: type) -> dict[str, inspect.Signature]:
        return {renamed.get(name, name): inspect.signature(f)
                for name, f in vars(cls).items() if inspect.isfunction(f)}

    sync, async_ = methods(Redial), methods(AsyncRedial)
    assert sync.keys() == async_.keys()
    for name, signature in sync.items():
        other = async_[name]
        assert list(signature.parameters.values()) == list(other.parameters.values()), name
        assert signature.return_annotation == other.return_annotation.replace(
            "AsyncIterator", "Iterator").replace("AsyncRedial", "Redial"), name
    for name, f in vars(AsyncRedial).items():
        if inspect.isfunction(f) and name != "__init__":
            assert inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f), name
    for name, f in vars(Redial).items():
        if inspect.isfunction(f):
            assert not (inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f)), name

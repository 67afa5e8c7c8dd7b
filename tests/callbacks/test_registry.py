"""Tests of torchbend.callbacks.registry: every callback is registered, has test examples and
declares its neutral setting."""

from __future__ import annotations

import inspect

import pytest
import torch
from callback_helpers import EXAMPLES, REGISTERED

import torchbend.callbacks
from torchbend.callbacks import CALLBACKS, BendingCallback, Noise, callback_from_name
from torchbend.callbacks.argument import declared
from torchbend.errors import BendingError


def test_the_registry_is_what_the_package_exports():
    exported = {
        obj
        for name in torchbend.callbacks.__all__
        if inspect.isclass(obj := getattr(torchbend.callbacks, name))
        and issubclass(obj, BendingCallback)
        and obj is not BendingCallback
    }
    assert exported == set(CALLBACKS.values())
    assert all(name == cls.__name__ for name, cls in CALLBACKS.items())


def test_aliases_resolve_by_name():
    assert callback_from_name("Normal") is Noise


@pytest.mark.parametrize("cls", REGISTERED, ids=lambda cls: cls.__name__)
def test_every_registered_callback_has_examples_of_its_arguments(cls):
    where = "tests/callbacks/callback_helpers.py"
    assert cls.__name__ in EXAMPLES, (
        f"add example arguments of {cls.__name__} to EXAMPLES in {where}"
    )
    missing = set(declared(cls)) - set(EXAMPLES[cls.__name__]())
    assert not missing, f"EXAMPLES[{cls.__name__!r}] must give {sorted(missing)}"


@pytest.mark.parametrize("cls", REGISTERED, ids=lambda cls: cls.__name__)
def test_every_registered_callback_declares_its_neutral_setting(cls):
    setting = cls.neutral_setting()  # raises for a callback that declares none
    for name, value in (setting or {}).items():
        assert declared(cls)[name].check(cls.__name__, value) == value


def test_a_callback_without_a_neutral_setting_is_caught():
    class Square(BendingCallback):
        def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
            return x * x.abs()

    with pytest.raises(BendingError, match=r"Square declares no neutral setting"):
        Square.neutral_setting()

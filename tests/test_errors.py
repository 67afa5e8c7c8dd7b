"""Every error class lives in torchbend.errors, derives from TorchbendError and is exported."""

from __future__ import annotations

import inspect

import torchbend as tb
from torchbend import errors


def test_every_error_is_in_errors_and_exported():
    classes = [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, Exception)
    ]
    assert {c.__name__ for c in classes} == {n for n in errors.__all__ if n[0].isupper()}
    for cls in classes:
        assert issubclass(cls, tb.TorchbendError)
        assert getattr(tb, cls.__name__) is cls


def test_no_error_class_is_defined_outside_errors():
    import pkgutil

    for info in pkgutil.walk_packages(tb.__path__, "torchbend."):
        module = __import__(info.name, fromlist=["_"])
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, tb.TorchbendError):
                assert value.__module__ == "torchbend.errors", (info.name, value)


def test_did_you_mean_reads_the_same_everywhere():
    assert errors.did_you_mean("conv_modul", ["conv_module", "lin"]) == (
        "; did you mean 'conv_module'?"
    )
    assert errors.did_you_mean("zzz", ["conv_module"]) == ""
    assert errors.did_you_mean("linear", ["linear1", "conv", "linear2"], 2) in (
        "; did you mean 'linear1' or 'linear2'?",
        "; did you mean 'linear2' or 'linear1'?",
    )

"""Tests of torchbend.callbacks.importing, and of the drop-in callbacks of the repo's callbacks/."""

from __future__ import annotations

import doctest
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks import Mask, Scale, callback_from_name, load_callbacks
from torchbend.callbacks.importing import PACKAGE
from torchbend.controls import BendingParameter

FOLDER = Path(__file__).resolve().parents[2] / "callbacks"
CPU = torch.device("cpu")
ACT = "forward:conv"
WEIGHT = "conv.weight"


def signed_randn(*shape: int) -> torch.Tensor:
    """Random values with a -0.0 first, which a sloppy identity would turn into +0.0."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x.view(-1)[0] = -0.0
    return x


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32)


@pytest.fixture(scope="module")
def found() -> dict[str, type[tb.BendingCallback]]:
    return load_callbacks(FOLDER)


GOOD = '''
"""A callback for the tests."""
import torch
import torchbend as tb
from torchbend import Scale  # imported, not defined here: not loaded


class Twice(tb.BendingCallback):
    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * FACTOR


FACTOR = 2
'''


# -- load_callbacks ----------------------------------------------------------------------------


def test_the_repo_folder_holds_three_drop_in_callbacks(found):
    assert {"BitCrusher", "WaveFolder", "FeedbackDelay"} <= set(found)
    for stem, name in [("bitcrusher", "BitCrusher"), ("wavefolder", "WaveFolder"),
                       ("feedback", "FeedbackDelay")]:  # fmt: skip
        cls = found[name]
        assert cls.__module__ == f"{PACKAGE}.{stem}"
        assert sys.modules[cls.__module__].__file__ == str(FOLDER / f"{stem}.py")
        assert cls.__doc__ and sys.modules[cls.__module__].__doc__
        assert callback_from_name(f"{cls.__module__}:{name}") is cls


def test_a_file_loads_the_callbacks_it_defines_only(tmp_path):
    (tmp_path / "twice_cb.py").write_text(GOOD)
    found = load_callbacks(tmp_path / "twice_cb.py")
    assert list(found) == ["Twice"]
    assert torch.equal(found["Twice"]()(torch.ones(2), ACT), torch.full((2,), 2.0))
    assert sys.modules[f"{PACKAGE}.twice_cb"].Twice is found["Twice"]


def test_loaded_callbacks_pickle_by_reference(found):
    crusher = found["BitCrusher"](bits=3, hold=2)
    again = pickle.loads(pickle.dumps(crusher))
    assert type(again) is type(crusher) and repr(again) == repr(crusher)


def test_loading_again_runs_the_file_again(tmp_path):
    file = tmp_path / "again_cb.py"
    file.write_text(GOOD)
    first = load_callbacks(file)["Twice"]
    file.write_text(GOOD.replace("FACTOR = 2", "FACTOR = 3"))
    second = load_callbacks(file)["Twice"]
    assert second is not first
    assert torch.equal(second()(torch.ones(1), ACT), torch.full((1,), 3.0))
    assert callback_from_name(f"{PACKAGE}.again_cb:Twice") is second


def test_a_file_with_the_stem_of_another_replaces_it_with_a_warning(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "same_stem_cb.py").write_text(GOOD)
    load_callbacks(tmp_path / "a" / "same_stem_cb.py")
    with pytest.warns(UserWarning, match="replaces .*same_stem_cb.py as module"):
        load_callbacks(tmp_path / "b" / "same_stem_cb.py")


def test_folders_skip_private_files_and_subfolders(tmp_path):
    (tmp_path / "one_cb.py").write_text(GOOD)
    (tmp_path / "_helpers.py").write_text("raise RuntimeError('not loaded')")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two_cb.py").write_text("raise RuntimeError('not loaded')")
    assert list(load_callbacks(tmp_path)) == ["Twice"]


def test_errors_name_the_path_and_chain_the_cause(tmp_path):
    with pytest.raises(tb.BendingError, match="no such file or folder"):
        load_callbacks(tmp_path / "missing.py")
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(tb.BendingError, match=r"notes.txt is not a Python file"):
        load_callbacks(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(tb.BendingError, match="no callback files in folder"):
        load_callbacks(tmp_path / "empty")

    broken = tmp_path / "broken_cb.py"
    broken.write_text("import torch\n1 / 0\n")
    with pytest.raises(tb.BendingError, match=r"broken_cb.py failed: ZeroDivisionError") as error:
        load_callbacks(broken)
    assert isinstance(error.value.__cause__, ZeroDivisionError)
    assert f"{PACKAGE}.broken_cb" not in sys.modules
    broken.write_text("def oops(:\n")
    with pytest.raises(tb.BendingError, match=r"broken_cb.py failed: SyntaxError"):
        load_callbacks(broken)

    plain = tmp_path / "plain_cb.py"
    plain.write_text("from torchbend import Scale\nX = 1\n")
    with pytest.raises(tb.BendingError, match=r"plain_cb.py defines no bending callback"):
        load_callbacks(plain)
    assert f"{PACKAGE}.plain_cb" not in sys.modules


def test_a_folder_with_two_callbacks_of_one_name_is_refused(tmp_path):
    (tmp_path / "first_cb.py").write_text(GOOD)
    (tmp_path / "second_cb.py").write_text(GOOD)
    with pytest.raises(tb.BendingError, match=r"Twice is defined both in .*first_cb.py and in"):
        load_callbacks(tmp_path)


# -- callback_from_name ------------------------------------------------------------------------


def test_callback_from_name():
    assert callback_from_name("Mask") is Mask
    assert callback_from_name("torchbend.callbacks.affine:Scale") is Scale
    assert callback_from_name("torchbend.callbacks:Scale") is Scale
    with pytest.raises(tb.BendingError, match="no callback 'Mak'; did you mean 'Mask'\\?"):
        callback_from_name("Mak")
    with pytest.raises(tb.BendingError, match="cannot import no_such_module"):
        callback_from_name("no_such_module:Thing")
    with pytest.raises(tb.BendingError, match=r"torchbend.callbacks has no Nope"):
        callback_from_name("torchbend.callbacks:Nope")
    with pytest.raises(tb.BendingError, match="os:getcwd is not a bending callback"):
        callback_from_name("os:getcwd")
    with pytest.raises(tb.BendingError, match=r"load its file first: .*never_loaded.py"):
        callback_from_name(f"{PACKAGE}.never_loaded:Thing")


def test_saved_configurations_find_loaded_callbacks(found):
    config = tb.BendingConfig((found["WaveFolder"](BendingParameter("fold", 0.5)), "conv$"))
    again = tb.BendingConfig.from_dict(config.to_dict())
    callback = again.items[0].callback
    assert type(callback) is found["WaveFolder"]
    assert callback.controls()[0].name == "fold"


# -- the drop-in callbacks ---------------------------------------------------------------------


def test_drop_in_doctests_pass(found):
    for stem in ("bitcrusher", "wavefolder", "feedback"):
        result = doctest.testmod(sys.modules[f"{PACKAGE}.{stem}"])
        assert result.attempted > 0 and result.failed == 0, stem


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("BitCrusher", {}), ("BitCrusher", {"bits": 0, "hold": 1}), ("WaveFolder", {}),
     ("FeedbackDelay", {}), ("FeedbackDelay", {"delay": 3, "feedback": 0.5, "mix": 0.0})],
)  # fmt: skip
def test_drop_in_neutral_settings_are_the_identity(found, name, kwargs):
    cb = found[name](**kwargs)
    x = signed_randn(2, 4, 32)
    w = signed_randn(4, 3)
    cb.register(ACT, x.shape, x.dtype, CPU)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_bitcrusher_reduces_depth_and_rate(found):
    x = signed_randn(2, 3, 32)
    crushed = found["BitCrusher"](bits=3)(x, ACT)
    torch.testing.assert_close(crushed, torch.round(x * 4) / 4)
    held = found["BitCrusher"](hold=4)(x, ACT)
    assert torch.equal(held, x[..., ::4].repeat_interleave(4, -1))


def test_wavefolder_folds_back_what_exceeds_the_threshold(found):
    x = torch.linspace(-5, 5, 101)
    out = found["WaveFolder"](1.0)(x, ACT)
    inside = x.abs() <= 1
    assert torch.equal(out[inside], x[inside])
    assert bool((out.abs() <= 1 + 1e-6).all())
    torch.testing.assert_close(out[x > 1][:10], 2 - x[x > 1][:10])  # 1 + d becomes 1 - d


def test_feedback_delay_carries_its_line_across_calls(found):
    signal = signed_randn(2, 3, 40)
    whole = found["FeedbackDelay"](delay=7, feedback=0.6, mix=0.8)
    whole.register(ACT, torch.Size([2, 3, 40]), torch.float32, CPU)
    expected = whole(signal, ACT)
    blocks = found["FeedbackDelay"](delay=7, feedback=0.6, mix=0.8)
    blocks.register(ACT, torch.Size([2, 3, 10]), torch.float32, CPU)
    got = torch.cat([blocks(block, ACT) for block in signal.split(10, -1)], -1)
    torch.testing.assert_close(got, expected)
    # By hand: an impulse echoes at 7, 14, ... samples, with gains mix, mix * feedback...
    impulse = torch.zeros(1, 1, 30)
    impulse[..., 0] = 1.0
    echo = found["FeedbackDelay"](delay=7, feedback=0.5, mix=1.0)
    echo.register(ACT, impulse.shape, torch.float32, CPU)
    out = echo(impulse, ACT)[0, 0]
    torch.testing.assert_close(out[[0, 7, 14, 21, 28]], torch.tensor([1.0, 1.0, 0.5, 0.25, 0.125]))
    assert int((out != 0).sum()) == 5


def test_feedback_delay_reset_and_other_shapes(found):
    echo = found["FeedbackDelay"](delay=4, feedback=0.5, mix=1.0)
    echo.register(ACT, torch.Size([3, 5, 8]), torch.float32, CPU)
    assert list(echo.state(ACT).shape) == [3, 5, 4]
    x = torch.ones(3, 5, 8)
    echo(x, ACT)
    assert bool(echo(torch.zeros(3, 5, 8), ACT).any())
    echo.reset()
    assert not bool(echo(torch.zeros(3, 5, 8), ACT).any())
    assert echo(torch.ones(1, 2, 6), ACT).shape == (1, 2, 6)  # another batch: a new, empty line
    assert found["FeedbackDelay"].scriptable is False


def test_feedback_delay_control_resizes_the_line(found):
    delay = BendingParameter("delay", 4)
    echo = found["FeedbackDelay"](delay=delay, mix=1.0)
    echo.register(ACT, torch.Size([1, 1, 8]), torch.float32, CPU)
    echo(torch.arange(1.0, 9.0)[None, None], ACT)
    delay.set(2)
    echo.control_changed()
    assert torch.equal(echo.state(ACT), torch.tensor([[[7.0, 8.0]]]))
    assert torch.equal(echo(torch.zeros(1, 1, 3), ACT), torch.tensor([[[7.0, 8.0, 0.0]]]))


@pytest.mark.parametrize(
    ("name", "arg", "before", "after", "others"),
    [("BitCrusher", "bits", 0, 3, {}), ("BitCrusher", "hold", 1, 3, {}),
     ("BitCrusher", "scale", 1.0, 2.0, {"bits": 2}), ("WaveFolder", "threshold", 2.0, 0.5, {}),
     ("FeedbackDelay", "mix", 0.0, 0.5, {"delay": 3}),
     ("FeedbackDelay", "feedback", 0.0, 0.5, {"delay": 3, "mix": 1.0})],
)  # fmt: skip
def test_drop_in_arguments_take_controls(found, name, arg, before, after, others):
    knob = BendingParameter("knob", before)
    cb = found[name](**{arg: knob}, **others)
    assert cb.controls() == [knob]
    cb.register(ACT, torch.Size([2, 3, 16]), torch.float32, CPU)
    knob.set(after)
    cb.control_changed()
    expected = found[name](**{arg: after}, **others)
    expected.register(ACT, torch.Size([2, 3, 16]), torch.float32, CPU)
    x = signed_randn(2, 3, 16)
    assert torch.equal(cb(x, ACT), expected(x, ACT))
    again = type(cb)(**cb.arguments())
    assert repr(again) == repr(cb)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("BitCrusher", {"bits": 4, "hold": 3, "scale": 2.0}), ("BitCrusher", {}),
     ("WaveFolder", {"threshold": 0.5}), ("WaveFolder", {})],
)  # fmt: skip
def test_drop_in_torchscript(found, name, kwargs):
    cb = found[name](**kwargs)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))


def test_drop_ins_bend_a_model_block_by_block(found):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 2, 1, bias=False), nn.Tanh())
    bended = tb.BendedModule(model)
    bended.trace(input=torch.randn(1, 1, 16))
    echo = found["FeedbackDelay"](delay=5, feedback=0.5, mix=0.5)
    bended.bend(echo, "_0$")
    bended.bend(found["BitCrusher"](bits=6), "_1$")
    signal = torch.sin(torch.arange(64.0) / 3)[None, None]
    out = torch.cat([bended(block) for block in signal.split(16, -1)], -1)
    assert out.shape == (1, 2, 64)
    silence = torch.zeros(1, 1, 16)
    assert bool(bended(silence).any())  # the echoes of the signal go on
    echo.reset()
    assert not bool(bended(silence).any())


@pytest.mark.slow
def test_the_tutorial_runs(tmp_path):
    example = FOLDER.parent / "examples" / "10_custom_callbacks.py"
    done = subprocess.run(
        [sys.executable, str(example), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "bent.wav").stat().st_size > 1000
    assert f"wrote {tmp_path / 'bent.wav'}" in done.stdout

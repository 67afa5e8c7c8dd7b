"""The RAVE section of docs/realtime.md, run as written on a RAVE-style file the tests build
(tests/models/rave_style.py, saved as the page's ``my_rave.ts``): its Python block, then its
command lines, in one folder as a reader would; the command's render is compared with the
Python block's, and the exported file with the bended module."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import torchbend as tb
from tests.models.rave_style import RATIO, write_rave_style
from torchbend.cli import main
from torchbend.export import check_nntilde

pytestmark = [pytest.mark.audio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "realtime.md"
HEADING = "## Your own model: a RAVE export"
KNEE = 10 ** (-1.9 / 20)
"""Below this peak, neither safety stage's limiter touches a sample (docs/realtime.md)."""


def section() -> dict[str, str]:
    """The code of the section's blocks by language (one Python block, one bash block)."""
    text = PAGE.read_text()
    start = text.index(HEADING)
    end = text.index("\n## ", start + len(HEADING))
    found = re.findall(r"^```(\w+)\n(.*?)^```", text[start:end], re.S | re.M)
    assert [language for language, _ in found] == ["python", "bash"]
    return dict(found)


@dataclass
class Ran:
    folder: Path
    namespace: dict[str, Any]
    """What the Python block defined."""
    outputs: list[tuple[list[str], str, list[str]]]
    """Each command's arguments, what it printed (stdout) and the warnings it gave."""

    def printed(self, command: str, index: int = 0) -> str:
        """What the ``index``-th run of ``command`` printed on stdout."""
        return [out for args, out, _ in self.outputs if args[0] == command][index]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """The section run in a folder holding ``my_rave.ts`` and the sound it reads."""
    folder = tmp_path_factory.mktemp("rave_section")
    write_rave_style(folder / "my_rave.ts")
    (folder / "assets" / "sounds").mkdir(parents=True)
    shutil.copy(ROOT / "assets" / "sounds" / "voice.wav", folder / "assets" / "sounds")
    code = section()
    here = os.getcwd()
    os.chdir(folder)
    try:
        namespace: dict[str, Any] = {"__name__": "__main__"}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code["python"], str(PAGE), "exec"), namespace)
        outputs = []
        for line in code["bash"].splitlines():
            assert line.startswith("torchbend "), f"not a torchbend command: {line!r}"
            args = shlex.split(line)[1:]
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    code_ = main(args)
            assert code_ == 0, f"{line}\n{err.getvalue()}"
            outputs.append((args, out.getvalue(), [str(w.message) for w in caught]))
    finally:
        os.chdir(here)
    return Ran(folder, namespace, outputs)


def test_the_section_shows_each_command_on_the_file() -> None:
    lines = [shlex.split(line) for line in section()["bash"].splitlines()]
    assert [args[1] for args in lines] == ["check", "inspect", "bend", "export", "check"]
    assert all("my_rave.ts" in args or "my_rave_bent.ts" in args for args in lines)


def test_check_shows_what_nntilde_sees_in_the_file(ran: Ran) -> None:
    out = ran.printed("check")
    assert "my_rave.ts: nn~ file, sample rate 44100" in out
    for method in ("encode", "decode", "forward"):  # on buffers of whole latent frames
        assert re.search(rf"{method}: .*buffers {RATIO}\.\.8192, batches 1, 4: ok", out)
    assert "attributes: learn_target, reset_target, learn_source, reset_source" in out


def test_export_warns_that_the_files_attributes_are_left_out(ran: Ran) -> None:
    [caught] = [caught for args, _, caught in ran.outputs if args[0] == "export"]
    [warning] = [w for w in caught if "nn~ attributes" in w]
    assert "['learn_target', 'reset_target', 'learn_source', 'reset_source']" in warning


def test_the_python_block_reads_the_files_contract(ran: Ran) -> None:
    rave = ran.namespace["rave"]
    assert ran.namespace["bended"].traced_by("forward") == "torchscript"
    stream = ran.namespace["stream"]
    assert stream.ratio == RATIO and stream.sample_rate == rave.sr
    assert ran.namespace["bended"].bendings  # the decoder's layer is bent


def test_the_command_renders_what_the_python_block_renders(ran: Ran) -> None:
    command, rate = tb.audio.load(ran.folder / "bent.wav")
    python, python_rate = tb.audio.load(ran.folder / "bent_python.wav")
    sound, _ = tb.audio.load(ran.folder / "assets" / "sounds" / "voice.wav")
    assert rate == python_rate and command.shape == python.shape == sound.shape
    # The two safety stages differ only in their limiter, which a peak this low never reaches.
    assert float(python.abs().max()) < KNEE
    assert torch.equal(command, python)
    # And the bending is heard: the unbent file, on the same seed, renders other samples.
    file = torch.jit.load(str(ran.folder / "my_rave.ts"))
    stream = tb.audio.Stream(file, block_size=8192, sample_rate=rate, safety=True)
    torch.manual_seed(0)
    with torch.no_grad():
        unbent = stream.process(sound)
    assert (unbent - python).abs().max() > 100 / 32768


def test_inspect_prints_the_tables_of_the_file_traced_on_the_sound(ran: Ran) -> None:
    out = ran.printed("inspect")
    bended = ran.namespace["bended"]
    assert bended.print_weights() in out
    names = set(bended.activation_names())
    shown = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert names <= shown
    frames = -(-44100 * 4 // RATIO)  # the sound, padded to whole latent frames
    assert f"torch.Size([1, 1, {frames * RATIO}])" in out


def test_export_writes_an_nntilde_file_that_bends_as_the_module_does(ran: Ran) -> None:
    path = ran.folder / "my_rave_bent.ts"
    report = check_nntilde(path)
    assert str(report).replace(str(path), path.name) in ran.printed("check", 1)
    assert report.sample_rate == 44100
    [forward] = report.methods
    assert (forward.name, forward.in_channels, forward.out_channels) == ("forward", 1, 1)
    # Every buffer nn~ gives, the smaller than a latent frame through the file's FIFO.
    assert forward.buffer_sizes[0] == 1 and report.fifo_block == RATIO
    # Streamed from fresh caches on the Python block's seed, the file renders its samples.
    sound, rate = tb.audio.load(ran.folder / "assets" / "sounds" / "voice.wav")
    file = torch.jit.load(str(path))
    stream = tb.audio.Stream(file, block_size=8192, sample_rate=rate, safety=True)
    torch.manual_seed(0)
    with torch.no_grad():
        got = stream.process(sound)
    python, _ = tb.audio.load(ran.folder / "bent_python.wav")  # 16-bit samples
    assert (got - python).abs().max() <= 1 / 32768


def test_a_file_exports_for_nntilde_and_says_so_for_other_formats(ran: Ran, capsys) -> None:
    args = ["export", str(ran.folder / "my_rave.ts"), "--format", "pt2", "-o", "x.pt2"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--format pt2 takes a Python model" in err and "--format nntilde" in err


def test_a_block_size_off_the_files_ratio_is_refused_with_the_sizes_that_fit(
    ran: Ran, capsys
) -> None:
    folder = ran.folder
    args = ["bend", str(folder / "my_rave.ts"), str(folder / "assets" / "sounds" / "voice.wav")]
    assert main([*args, str(folder / "x.wav"), "--block-size", "3072"]) == 2
    err = capsys.readouterr().err
    assert f"not a multiple of the model's ratio {RATIO}" in err and "2048 and 4096" in err

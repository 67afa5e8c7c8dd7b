"""The README's command lines, run as written, give what the Python API gives."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import torch

import torchbend as tb
from torchbend.audio.safety import FILE_CEILING, Safety
from torchbend.audio.stream import Stream
from torchbend.cli import main, parse_bend
from torchbend.export import check_nntilde

pytestmark = pytest.mark.audio

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[list[str]]:
    """The ``torchbend ...`` lines of the README's bash blocks, split as a shell would."""
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("torchbend "):
                lines.append(shlex.split(line)[1:])
    return lines


MODEL = "tiny_ddsp"
"""The shipped model the README's commands use."""


def readme_bends(path: Path) -> list[str]:
    """A bending configuration of the README's model saved at ``path``, as the README's
    Python saves one; returns its bendings as --bend specs, for comparisons."""
    bended = tb.BendedModule(tb.models.load(MODEL))
    bended.trace(x=torch.zeros(1, 1, 2048))
    bended.bend(tb.Mask(0.3, dim=-2, seed=0), "decoder_3$")
    bended.bend(tb.Scale(0.5), r"decoder\.6\.weight")
    bended.bending_config().save(path)
    return ["Mask(prob=0.3, dim=-2, seed=0)@decoder_3$", r"Scale(0.5)@decoder\.6\.weight"]


def python_render(
    audio: torch.Tensor, specs: list[str], block: int = 8192, safety: bool = False
) -> torch.Tensor:
    """What the Python API renders: the README's model streaming, from a clean state; with
    ``safety``, through the safety stage for files, as ``torchbend bend`` writes them."""
    model = tb.models.load(MODEL).set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, block))
    for spec in specs:
        bended.bend(*parse_bend(spec))
    stage = Safety(44100, ceiling=FILE_CEILING) if safety else False
    stream = Stream(bended, block_size=block, safety=stage)
    stream.reset()
    with torch.no_grad():
        return stream.process(audio)


def comparable(folder: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timing"} for r in tb.sweep.read_rows(folder)]


def check_sweep(args: list[str], out: str, tmp_path: Path) -> None:
    """What each ``torchbend sweep`` step printed or wrote against the Python API's result."""
    step = args[1]
    if step == "plan":
        planned = tb.sweep.plan(args[2], probe=False)
        sounds = len(list((ROOT / "assets" / "sounds").glob("*.wav")))
        assert f"= {planned.renders} renders" in out and planned.renders == 4 * sounds
    if step == "run":
        tb.sweep.run(args[2], tmp_path / "python_sweep", workers=0)
        folder = Path(args[args.index("--out") + 1])
        assert comparable(folder) == comparable(tmp_path / "python_sweep")
        for row in tb.sweep.read_rows(folder):
            assert (folder / row["audio"]).read_bytes() == (
                tmp_path / "python_sweep" / row["audio"]
            ).read_bytes()
    if step == "map":
        assert (Path(args[2]) / "atlas.html").is_file() and (Path(args[2]) / "atlas.png").is_file()
    if step == "best":
        rows = tb.sweep.best(args[2], by="distance", top=5)
        assert [line.split()[2] for line in out.splitlines()] == [r["id"] for r in rows]


def check_studio(args: list[str], tmp_path: Path) -> None:
    """The studio the README starts bends and renders as Python does."""
    from tests.cli.test_studio import studio_command
    from tests.studio.client import decode_wav

    mask = {"class": "Mask", "args": {"prob": 0.3, "dim": -2, "seed": 0}}
    with studio_command(args, tmp_path) as client:
        assert client.ok("GET", "/api/model")["model"] == MODEL  # the studio's default
        client.ok("POST", "/api/bendings", {"callback": mask, "patterns": ["decoder_1$"]})
        rendered = client.ok("POST", "/api/render", {"sound": "pad"})
        heard, _ = decode_wav(client.get(rendered["audio"]["bended"])[1])
    sound, _ = tb.audio.load(ROOT / "assets" / "sounds" / "pad.wav", mono=True)
    python = python_render(sound, ["Mask(prob=0.3, dim=-2, seed=0)@decoder_1$"], safety=True)
    assert torch.allclose(heard, python.clamp(-1, 1), atol=1 / 32767)


def test_the_readme_shows_each_command() -> None:
    shown = {args[0] for args in readme_commands()}
    assert shown == {"inspect", "bend", "export", "check", "live", "demo", "sweep", "studio"}


def test_readme_commands_give_what_the_python_api_gives(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    specs = readme_bends(tmp_path / "bends.json")
    for args in readme_commands():
        args = [str(ROOT / a) if a.startswith("assets/") else a for a in args]
        command = args[0]
        if command == "demo":
            continue  # tests/cli/test_commands.py::test_demo_renders_files_and_picture
        if command == "studio":  # a server: run as a process of its own, then stopped
            check_studio(args, tmp_path)
            continue
        if command == "sweep":
            args = [str(ROOT / a) if a.startswith("examples/") else a for a in args]
        if command == "live":
            args += ["--duration", "0.2"]
        code = main(args)
        out, err = capsys.readouterr()
        if command == "live" and code != 0:
            assert "error:" in err and len(err.strip().splitlines()) == 1
            pytest.skip(f"no sound card here: {err.strip()}")  # tests/audio/test_live.py
        assert code == 0, err
        if command == "inspect":  # the tables of the model traced on the padded sound
            sound, _ = tb.audio.load(args[args.index("--audio") + 1], mono=True)
            model = tb.models.load(MODEL)
            bended = tb.BendedModule(model)
            pad = -sound.shape[-1] % model.ratio
            bended.trace(x=torch.nn.functional.pad(sound, (0, pad))[None])
            assert bended.print_weights() in out and bended.print_activations() in out
            assert "pitch, loudness, brightness, noisiness" in out  # the latent's names
        if command == "bend":  # the same samples as streaming from Python
            sound, rate = tb.audio.load(args[2], mono=True)
            bend_specs = [args[i + 1] for i, a in enumerate(args) if a == "--bend"]
            rendered = python_render(sound, bend_specs, safety=True)
            tb.audio.save(tmp_path / "python.wav", rendered, rate)
            got, _ = tb.audio.load(args[3])
            expected, _ = tb.audio.load(tmp_path / "python.wav")
            assert got.shape == sound.shape and torch.equal(got, expected)
        if command == "export":  # the file computes what the configured model computes
            bended = tb.BendedModule(tb.models.load(MODEL))
            bended.trace(x=torch.randn(1, 1, 4096, generator=torch.Generator().manual_seed(0)))
            for spec in specs:
                bended.bend(*parse_bend(spec))
            exported = torch.jit.load(args[args.index("-o") + 1])
            x = torch.randn(1, 1, 4096)
            with torch.no_grad():
                assert torch.equal(exported(x), bended(x))
        if command == "check":
            assert str(check_nntilde(args[1])) in out
        if command == "sweep":
            check_sweep(args, out, tmp_path)
        if command == "live":
            assert "blocks of 2048" in out and "OSC on 127.0.0.1:9000" in out
            assert "realtime" in out.splitlines()[-1]

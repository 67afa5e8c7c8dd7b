"""This checkout against another commit of torchbend, in the same run: calls, updates, streaming.

Run: python benchmarks/bench_versions.py [--before REV] [--quick] [--traces]
     [--write docs/benchmarks.md]

The package at ``REV`` (default ``HEAD~1``) is extracted with ``git archive`` into a temporary
folder as ``torchbend_before`` and imported next to this checkout's ``torchbend``, so that each
round times the same work with both, in a shuffled order, on one thread. Reported: median times
and the median over rounds of ``after / before`` (paired), for the per-call cost
(bench_call's conv stack: nothing bent, an activation masked, a weight scaled), a control
update + call (activation and weight controls, as bench_update) and one streamed block of
this checkout's TinyRave (``models.load("tiny_rave")``) bent by each with a Mask and a Scale
(as bench_realtime, block 2048). With ``--traces``: one trace of each of a few zoo models
(tests/zoo/models.py) instead, by the concrete backend, its self-check included.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import io
import platform
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from bench_call import ConvStack, bended_variants, interleaved, write_section

ROOT = Path(__file__).resolve().parents[1]


def import_before(rev: str, into: Path) -> ModuleType:
    """Package ``torchbend`` at ``rev`` imported as ``torchbend_before``."""
    data = subprocess.run(
        ["git", "archive", rev, "torchbend"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    (into / "torchbend").rename(into / "torchbend_before")
    sys.path.insert(0, str(into))
    return importlib.import_module("torchbend_before")


def calls(tb: ModuleType, model: torch.nn.Module, x: torch.Tensor) -> dict[str, Callable]:
    out: dict[str, Callable] = {
        f"call, {label}": functools.partial(bended, x)
        for label, bended in bended_variants(tb, model, x).items()
    }
    values = iter(float(v) for v in torch.rand(100000, generator=torch.Generator().manual_seed(0)))
    for label, pattern in (("activation", "convs_3$"), ("weight", r"convs\.3\.weight")):
        bended = tb.BendedModule(model)
        bended.trace(x=x)
        bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), pattern)

        def update(b: torch.nn.Module = bended) -> None:
            b.update("gain", next(values))
            b(x)

        out[f"update ({label} control) + call"] = update
    return out


def stream(tb: ModuleType, model: torch.nn.Module, block: int) -> Callable:
    """One streamed block of ``model`` (this checkout's TinyRave, in streaming mode: the
    other commit's may not read these weights) bent by ``tb``."""
    bent = tb.BendedModule(model)
    bent.trace(x=torch.zeros(1, 1, block))
    bent.bend(tb.Mask(0.3, dim=-2, seed=0), "decoder_1$")
    bent.bend(tb.Scale(0.8), r"decoder\.2\.weight")
    s = tb.audio.stream.Stream(bent, block_size=block)
    x = torch.randn(1, block, generator=torch.Generator().manual_seed(0)) * 0.1
    return functools.partial(s.process_block, x)


TRACED = ("LlamaModel", "T5Model", "EncodecModel", "UNet2DModel")
"""Zoo models (tests/zoo/models.py) whose trace ``--traces`` times."""


def traces(tb: ModuleType) -> dict[str, Callable]:
    """One trace (a new BendedModule, the concrete backend, the self-check included) of each
    model of :data:`TRACED`, by ``tb``."""
    sys.path.insert(0, str(ROOT / "tests" / "zoo"))
    from models import ALL

    out: dict[str, Callable] = {}
    for name in TRACED:
        zoo = next(m for m in ALL if m.name == name)
        module, inputs = zoo.build()

        def trace(m: torch.nn.Module = module, i: dict = inputs, method: str = zoo.method) -> None:
            tb.BendedModule(m, backend="concrete").trace(method, **i)

        out[f"trace {name}"] = trace
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="HEAD~1", help="git revision to compare with")
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test)")
    parser.add_argument("--write", type=Path, help="replace the table in this Markdown file")
    parser.add_argument(
        "--traces", action="store_true", help="time traces of zoo models instead of calls"
    )
    args = parser.parse_args()
    rounds = 5 if args.quick else 9 if args.traces else 300
    torch.set_num_threads(1)
    import torchbend as after

    rev = (
        subprocess.run(
            ["git", "rev-parse", "--short", args.before], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .strip()
    )
    with tempfile.TemporaryDirectory() as tmp:
        before = import_before(args.before, Path(tmp))
        torch.manual_seed(0)
        model = ConvStack(8, 32).eval()
        x = torch.randn(1, 1, 4096)
        shipped = after.models.load("tiny_rave").set_streaming(True)
        fns: dict[str, Callable] = {}
        for tag, tb in (("before", before), ("after", after)):
            work = traces(tb) if args.traces else calls(tb, model, x)
            for name, fn in work.items():
                fns[f"{name} [{tag}]"] = fn
            if not args.traces:
                fns[f"stream block 2048, Mask + Scale [{tag}]"] = stream(tb, shipped, 2048)
        names = sorted({k.rsplit(" [", 1)[0] for k in fns})
        pairs = [(f"{n} [after]", f"{n} [before]") for n in names]
        with torch.inference_mode(not args.traces):
            med, ratio = interleaved(fns, rounds, pairs=pairs, warmup=1 if args.traces else 3)
    lines = [
        f"before: {rev}; after: this checkout; torch {torch.__version__}, 1 thread, "
        f"{platform.processor() or platform.machine()}, {rounds} rounds",
        "",
        "| work | before | after | after / before (paired median) |",
        "|---|---|---|---|",
    ]
    for n in names:
        a, b = f"{n} [after]", f"{n} [before]"
        paired = ratio[f"{a} / {b}"]
        lines.append(f"| {n} | {med[b] * 1e3:.3f} ms | {med[a] * 1e3:.3f} ms | {paired:.3f}x |")
    print("\n".join(lines))
    if args.write:
        section = "bench_versions_traces" if args.traces else "bench_versions"
        write_section(args.write, section, lines[2:] if not args.traces else lines)


if __name__ == "__main__":
    main()

"""The real host for tests: nn~ files played by the nn~ external inside a headless Pure Data,
and what nn~ should give, computed by calling the file the way nn~ calls it.

nn~ is not part of torchbend (its licence, CC BY-NC, keeps it a test tool): the tests find a
build of its Pd external in the folder named by :data:`ENV` (the check command sets it to
``../shared/nntilde``) and Pure Data as ``pd`` on the PATH (scripts/system_pd.sh installs
``puredata-core``); without either, they skip and say which is missing.

One Pd run plays one input through several ``[nn~ FILE METHOD N]`` objects at once, one per
buffer size N (or a chain of them, ``encode`` into ``decode``), so that every buffer size of a
file costs one start of Pd. :func:`nn_emulation` is what nn~ computes, from its source and the
facts measured with this build (``../shared/nntilde/README.md``): blocks of N samples, each
method's input frames taken as the last sample of every ``in_ratio`` samples, its output
frames held for ``out_ratio`` samples, the output ``2N - 64`` samples late.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import torch

ENV = "TORCHBEND_NNTILDE"
"""The environment variable naming the folder of nn~'s Pd external (``nn~.pd_linux``)."""

TICK = 64
"""Pd's DSP block, in samples: messages reach nn~ between ticks."""

RATE = 44100

OBJECTS_PER_RUN = 4
"""nn~ objects in one Pd run. With several, Pd sometimes crashes on quitting, after every
file is written (nn~ registers no free method, and libtorch's threads are torn down by the
exit): fewer objects make it rare, and a crash after the last write is not a failure."""


def missing() -> str | None:
    """Why the real host cannot run here, or ``None`` when it can."""
    folder = os.environ.get(ENV)
    if not folder:
        return f"{ENV} is not set (the check command sets it to ../shared/nntilde)"
    if not (Path(folder) / "nn~.pd_linux").is_file():
        return f"{ENV}={folder} holds no nn~.pd_linux"
    if shutil.which("pd") is None:
        return "no pd on the PATH (scripts/system_pd.sh installs puredata-core)"
    return None


needs_pd = pytest.mark.skipif(missing() is not None, reason=f"real nn~ host: {missing()}")
"""Marks a test that plays files in Pure Data."""


def lag(buffer: int) -> int:
    """Samples by which nn~ (with its compute thread) delays its output at buffer ``buffer``."""
    return 2 * buffer - TICK


def first_block(sample: int, buffer: int) -> int:
    """The first block of ``buffer`` samples nn~ starts computing after a message sent before
    the tick that holds ``sample``."""
    tick = sample - sample % TICK
    return -(-(tick + TICK) // buffer) - 1


def delays(file: str | Path, model: bool = False) -> dict[int, int]:
    """Per buffer size, the samples by which Pd's output of ``file`` trails what Python
    streams: nn~'s buffering and the file's FIFO, as ``tb.export.latency`` reports them (the
    model's own delay is in both, unless ``model``: then it is counted too)."""
    from torchbend.export import latency

    return {
        row.buffer: row.host + row.fifo + (row.model if model else 0)
        for row in latency(file).rows
        if row.host is not None
    }


@dataclass(frozen=True)
class Message:
    """A message to every nn~ object of a run, before the DSP tick that holds ``sample``:
    ``text`` as Pd sends it (``"set drive 0"``), and what the file's setter should receive
    (``apply``, called on a loaded file) for :func:`nn_emulation`."""

    sample: int
    text: str
    apply: Callable[[Any], Any] | None = None


@dataclass
class PdRun:
    """What one Pd run gave: per buffer size, the output ``[channels, time]`` of the last
    object of the chain; Pd's console; the errors it printed."""

    outputs: dict[int, np.ndarray]
    log: str
    errors: list[str] = field(default_factory=list)
    elapsed_ms: float | None = None
    """Pd's own clock from the first DSP tick to the last computation's end (all the objects
    of the run), in ms; ``None`` for several runs."""


class _Patch:
    """A Pd patch written object by object (the ``#X`` lines of a .pd file)."""

    def __init__(self) -> None:
        self.lines = ["#N canvas 0 0 800 600 10;"]
        self.count = 0

    def add(self, text: str, kind: str = "obj") -> int:
        self.lines.append(f"#X {kind} 0 {20 * self.count} {text};")
        self.count += 1
        return self.count - 1

    def wire(self, a: int, outlet: int, b: int, inlet: int) -> None:
        self.lines.append(f"#X connect {a} {outlet} {b} {inlet};")


def _escape(text: str) -> str:
    return text.replace(";", r"\;").replace(",", r"\,").replace("$", r"\$")


def _ms(samples: float) -> str:
    return f"{samples * 1000.0 / RATE:.6f}"


def play(
    file: str | Path,
    audio: np.ndarray | torch.Tensor,
    workdir: Path,
    *,
    methods: Sequence[str] = ("forward",),
    buffers: Sequence[int] = (256,),
    messages: Sequence[Message] = (),
    arrays: dict[str, Sequence[float]] | None = None,
    channels: Sequence[int] | None = None,
    timeout: float = 120,
) -> PdRun:
    """Play ``audio`` (``[in_channels, time]``, float) through ``file`` in nn~ inside Pd.

    For each buffer size N of ``buffers``: a chain of ``[nn~ file METHOD N]`` objects, one per
    entry of ``methods``, each sent ``[bufsize N(`` before DSP starts (nn~'s one-in, one-out
    methods keep 4096-sample buffers without it), the outlets of one wired to the inlets of the
    next. ``channels``: the signal channels of each method of the chain, ``[in, out, out...]``
    (read from the file's ``<method>_params`` when left out). ``messages`` go to every object
    of every chain; ``arrays`` are Pd arrays defined and filled before DSP starts (their names
    can then be sent in ``[set NAME ARRAY(``). Raises on a Pd failure; nn~'s errors are in the
    run's ``errors``.
    """
    file = Path(file).resolve()
    signal = np.asarray(audio, dtype=np.float32)
    if signal.ndim != 2:
        raise ValueError(f"audio must be [channels, time], got shape {signal.shape}")
    if channels is None:
        loaded = torch.jit.load(str(file))
        params = [getattr(loaded, f"{m}_params").tolist() for m in methods]
        channels = [int(params[0][0]), *(int(p[2]) for p in params)]
    per_run = max(1, OBJECTS_PER_RUN // len(methods))
    runs = []
    for k in range(0, len(buffers), per_run):
        part = list(buffers[k : k + per_run])
        folder = workdir / f"run{k // per_run}"
        runs.append(
            _play_once(file, signal, folder, methods, part, messages, arrays, channels, timeout)
        )
    outputs = {n: out for run in runs for n, out in run.outputs.items()}
    errors = [e for r in runs for e in r.errors]
    elapsed = runs[0].elapsed_ms if len(runs) == 1 else None
    return PdRun(outputs, "\n".join(r.log for r in runs), errors, elapsed)


def _play_once(
    file: Path,
    signal: np.ndarray,
    workdir: Path,
    methods: Sequence[str],
    buffers: Sequence[int],
    messages: Sequence[Message],
    arrays: dict[str, Sequence[float]] | None,
    channels: Sequence[int],
    timeout: float,
) -> PdRun:
    workdir.mkdir(parents=True, exist_ok=True)
    frames = signal.shape[1]
    soundfile.write(workdir / "input.wav", signal.T, RATE, subtype="FLOAT")
    patch = _Patch()
    start = patch.add("loadbang")
    order = patch.add("t b b b b")  # right to left: read, arrays + bufsize, dsp on, play
    read = patch.add(
        "read -resize input.wav " + " ".join(f"in{i}" for i in range(len(signal))), "msg"
    )
    filer = patch.add("soundfiler")
    patch.wire(start, 0, order, 0)
    patch.wire(order, 3, read, 0)
    patch.wire(read, 0, filer, 0)
    for i in range(len(signal)):
        patch.add(f"table in{i}")
    for name, values in (arrays or {}).items():
        patch.add(f"array define {name} {len(values)}")
        fill = patch.add(_escape(f"; {name} 0 " + " ".join(f"{v:.9g}" for v in values)), "msg")
        patch.wire(order, 2, fill, 0)
    dsp = patch.add(_escape("; pd dsp 1"), "msg")
    patch.wire(order, 1, dsp, 0)
    players = []
    for i in range(len(signal)):
        players.append(patch.add(f"tabplay~ in{i}"))
        patch.wire(order, 0, players[-1], 0)
    objects: list[int] = []
    tables: dict[int, list[str]] = {}
    for n in buffers:
        upstream = [(p, 0) for p in players]
        for k, method in enumerate(methods):
            nn = patch.add(f"nn~ {file} {method} {n}")
            objects.append(nn)
            size = patch.add(f"bufsize {n}", "msg")
            patch.wire(order, 2, size, 0)
            patch.wire(size, 0, nn, 0)
            for inlet, (source, outlet) in enumerate(upstream):
                patch.wire(source, outlet, nn, inlet)
            upstream = [(nn, j) for j in range(channels[k + 1])]
        tables[n] = []
        for j, (source, outlet) in enumerate(upstream):
            name = f"out{n}_{j}"
            tables[n].append(name)
            patch.add(f"table {name} {frames}")
            recorder = patch.add(f"tabwrite~ {name}")
            patch.wire(order, 0, recorder, 0)
            patch.wire(source, outlet, recorder, 0)
    for m in messages:
        # Mid-tick, so that rounding the delay to Pd's clock cannot move it to another tick.
        wait = patch.add(f"delay {_ms(m.sample - m.sample % TICK + TICK / 2)}")
        text = patch.add(_escape(m.text), "msg")
        patch.wire(order, 0, wait, 0)
        patch.wire(wait, 0, text, 0)
        for nn in objects:
            patch.wire(text, 0, nn, 0)
    # Past the last tick, so that every tabwrite~ has filled its table.
    end = patch.add(f"delay {_ms(-(-frames // TICK) * TICK + TICK)}")
    last = patch.add(f"t b b {' '.join('b' for _ in buffers)}")
    patch.wire(order, 0, end, 0)
    patch.wire(end, 0, last, 0)
    # [bufsize( joins nn~'s compute thread: Pd must not quit while one runs the model.
    join = patch.add("bufsize 8192", "msg")
    patch.wire(last, len(buffers) + 1, join, 0)
    joined = patch.add("t b a")  # right first: the threads joined, then the clock read
    patch.wire(join, 0, joined, 0)
    for nn in objects:
        patch.wire(joined, 1, nn, 0)
    clock = patch.add("realtime")
    shown = patch.add("print elapsed_ms")
    patch.wire(order, 0, clock, 0)
    patch.wire(joined, 0, clock, 1)
    patch.wire(clock, 0, shown, 0)
    writer = patch.add("soundfiler")
    for k, n in enumerate(buffers):
        write = patch.add(f"write -wave -bytes 4 out{n}.wav " + " ".join(tables[n]), "msg")
        patch.wire(last, k + 1, write, 0)
        patch.wire(write, 0, writer, 0)
    quit_ = patch.add(_escape("; pd quit"), "msg")
    patch.wire(last, 0, quit_, 0)
    (workdir / "run.pd").write_text("\n".join(patch.lines) + "\n")
    code, log = run_pd(workdir, ["-open", str(workdir / "run.pd")], timeout=timeout)
    outputs = {}
    for n in buffers:
        out = workdir / f"out{n}.wav"
        if not out.is_file() or f"out{n}.wav" not in log:
            raise RuntimeError(f"Pd (exit {code}) wrote no out{n}.wav; its console:\n{log[-3000:]}")
        data, _ = soundfile.read(out, dtype="float32", always_2d=True)
        outputs[n] = data.T
    elapsed = re.findall(r"^elapsed_ms: ([-\d.e+]+)", log, re.M)
    return PdRun(outputs, log, nn_errors(log), float(elapsed[0]) if elapsed else None)


def run_pd(workdir: Path, args: Sequence[str], timeout: float = 120) -> tuple[int, str]:
    """Run headless Pd (no GUI, no sound card, as fast as it computes) with nn~ on its path and
    our torch's libtorch on the loader's path (one thread per model call, as the tests run);
    its exit code and console (also in ``workdir/pd.log``)."""
    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    lib = Path(torch.__file__).parent / "lib"
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    cmd = ["pd", "-nogui", "-nosound", "-batch", "-noprefs", "-stderr", "-r", str(RATE)]
    cmd += ["-path", os.environ[ENV], *args]
    done = subprocess.run(
        cmd,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    log = done.stdout + done.stderr
    (workdir / "pd.log").write_text(log)
    return done.returncode, log


def nn_errors(log: str) -> list[str]:
    """The lines of Pd's console where nn~ or Pd reported a failure."""
    pattern = r"error|fail|could not|not found|exception|terminate"
    return [line for line in log.splitlines() if re.search(pattern, line, re.I)]


def nn_emulation(
    file: str | Path,
    audio: np.ndarray | torch.Tensor,
    buffer: int,
    *,
    methods: Sequence[str] = ("forward",),
    messages: Sequence[Message] = (),
    early: frozenset[int] = frozenset(),
) -> np.ndarray:
    """What nn~ gives at ``buffer`` for ``audio`` ``[channels, time]``: ``file`` freshly
    loaded per method, called on blocks of ``buffer`` samples, the chain's output late by
    ``2 * buffer - 64`` per object. A message's setter runs before the first block nn~ starts
    computing after the message arrives; nn~'s compute thread may still be running the block
    before (the setter then waits for it and that block misses the change), or not yet (it
    sees the change): the messages whose index is in ``early`` apply one block earlier.
    """
    x = torch.as_tensor(np.asarray(audio, dtype=np.float32))
    for method in methods:
        model = torch.jit.load(str(file))
        in_channels, in_ratio, out_channels, out_ratio = getattr(model, f"{method}_params").tolist()
        when = {}
        for i, m in enumerate(messages):
            if m.apply is None:
                continue
            when.setdefault(first_block(m.sample, buffer) - (i in early), []).append(m.apply)
        blocks = x.shape[-1] // buffer
        outs = []
        with torch.no_grad():
            for b in range(blocks):
                for apply in when.get(b, []):
                    apply(model)
                block = x[:, b * buffer : (b + 1) * buffer]
                frames = block.reshape(in_channels, -1, in_ratio)[..., -1][None]
                y = getattr(model, method)(frames)[0]
                outs.append(y.repeat_interleave(out_ratio, -1))
        y = torch.cat(outs, -1) if outs else torch.zeros(out_channels, 0)
        late = torch.zeros(out_channels, lag(buffer))
        x = torch.cat([late, y], -1)[:, : x.shape[-1]]
        x = torch.nn.functional.pad(x, (0, blocks * buffer - x.shape[-1]))
    return x.numpy()


def compare(
    file: str | Path,
    audio: np.ndarray,
    run: PdRun,
    *,
    methods: Sequence[str] = ("forward",),
    messages: Sequence[Message] = (),
    tolerance: float = 1e-5,
) -> dict[int, float]:
    """Per buffer size of ``run``, the largest difference between what Pd played and
    :func:`nn_emulation`, trying for each message the two blocks nn~ may apply it to (the
    one where the output first differs is the one to move); asserts each is within
    ``tolerance``."""
    errors = {}
    for n, played in run.outputs.items():
        early: set[int] = set()
        while True:
            expected = nn_emulation(
                file, audio, n, methods=methods, messages=messages, early=frozenset(early)
            )
            length = min(played.shape[-1], expected.shape[-1])
            diff = np.abs(played[:, :length] - expected[:, :length]).max(axis=0)
            worst = float(diff.max()) if length else 0.0
            if worst <= tolerance:
                break
            first = int(np.argmax(diff > tolerance))
            moved = _message_at(first, n, messages, early, len(methods))
            if moved is None:
                break
            early.add(moved)
        errors[n] = worst
    bad = {n: e for n, e in errors.items() if e > tolerance}
    assert not bad, (
        f"Pd's output differs from nn~'s call pattern at buffers {bad}; errors: {run.errors[:5]}"
    )
    return errors


def _message_at(
    sample: int, buffer: int, messages: Sequence[Message], early: set[int], depth: int
) -> int | None:
    """The message not yet moved whose later block is the one where the output of a chain of
    ``depth`` objects first differs at ``sample``, if any."""
    block = (sample - depth * lag(buffer)) // buffer
    for i, m in enumerate(messages):
        if i in early or m.apply is None:
            continue
        first = first_block(m.sample, buffer)
        if first - 1 <= block <= first:
            return i
    return None

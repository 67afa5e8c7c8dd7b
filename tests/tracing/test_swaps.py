"""Tracing in several threads at once: each trace sees its own swapped functions, and code
running plainly in another thread meanwhile sees the real ones."""

from __future__ import annotations

import builtins
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchbend.tracing import BendingTracer
from torchbend.tracing.swaps import swapped

REAL_ISINSTANCE = builtins.isinstance
REAL_ONES = torch.ones


class Gated(nn.Module):
    """User code asking ``isinstance`` of a traced tensor, a factory taking a traced size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor):  # a proxy, true as on the concrete tensor
            x = self.conv(x)
        return x + torch.ones(x.shape[-1])


class Other(nn.Module):
    """User code asking ``callable`` of a traced tensor, seeding, and a factory of two sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: Any) -> Any:
        y = self.lin(x)
        if callable(y):  # a proxy has __call__, a tensor has not: eager code skips this
            y = y * 0
        torch.manual_seed(3)
        return torch.zeros(y.shape[0], 4) + y.relu() + torch.rand(4)


def _shape(graph: torch.fx.Graph) -> list[tuple[str, str]]:
    return [(n.op, str(n.target)) for n in graph.nodes]


def _traced(model: nn.Module, x: torch.Tensor) -> torch.fx.Graph:
    return BendingTracer().trace_method(model, "forward", {"x": x})


def _repeat(
    times: int, body: Callable[[], None], failures: list[BaseException]
) -> Callable[[], None]:
    def run() -> None:
        try:
            for _ in range(times):
                body()
        except BaseException as e:  # the main thread reports it
            failures.append(e)

    return run


def test_two_threads_trace_two_modules_while_a_third_runs_plain_code():
    torch.manual_seed(0)
    gated, other = Gated(), Other()
    xg, xo = torch.randn(1, 1, 16), torch.randn(3, 8)
    expected = {"gated": _shape(_traced(gated, xg)), "other": _shape(_traced(other, xo))}
    assert ("call_module", "conv") in expected["gated"]
    lin = nn.Linear(8, 4)
    with torch.no_grad():
        plain = lin(xo)
    failures: list[BaseException] = []
    graphs: dict[str, list[Any]] = {"gated": [], "other": []}
    stop = threading.Event()
    overlapped = [0]

    def trace_gated() -> None:
        traced = _traced(gated, xg)
        graphs["gated"].append((_shape(traced), traced.grad_mode))

    def trace_other() -> None:
        traced = _traced(other, xo)
        graphs["other"].append((_shape(traced), traced.grad_mode))

    def eager() -> None:
        while not stop.is_set():
            overlapped[0] += builtins.isinstance is not REAL_ISINSTANCE
            # What a trace in another thread swaps must not reach this thread: a module called
            # here runs as itself (not recorded, its weights tensors), factories give tensors,
            # callable answers on the tensor, and seeding or reading the grad mode here leaves
            # the traces alone.
            with torch.no_grad():
                assert torch.equal(lin(xo), plain)
            assert type(torch.ones(2, 3)) is torch.Tensor
            assert not callable(plain) and isinstance(plain, torch.Tensor)
            assert type(lin.weight) is nn.Parameter
            torch.manual_seed(1)
            torch.is_grad_enabled()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, inside traces
    threads = [
        threading.Thread(target=_repeat(15, trace_gated, failures)),
        threading.Thread(target=_repeat(15, trace_other, failures)),
    ]
    watcher = threading.Thread(target=_repeat(1, eager, failures))
    try:
        watcher.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    finally:
        stop.set()
        watcher.join(timeout=60)
        sys.setswitchinterval(interval)
    assert not failures, failures[0]
    assert overlapped[0] > 0, "the plain thread never ran while a trace did"
    for name, results in graphs.items():
        assert len(results) == 15
        for shape, grad_mode in results:
            assert shape == expected[name], name
            assert grad_mode is None, f"{name} read the grad mode another thread read"
    assert builtins.isinstance is REAL_ISINSTANCE and torch.ones is REAL_ONES


def test_swaps_nest_and_stay_in_their_thread():
    def first(*args: Any) -> str:
        return "first"

    def second(*args: Any) -> str:
        return "second"

    seen: list[Any] = []
    with swapped(builtins, "len", first):
        assert len([1]) == "first"
        with swapped(builtins, "len", second):
            assert len([1]) == "second"
            other = threading.Thread(target=lambda: seen.append(len([1, 2])))
            other.start()
            other.join()
        assert len([1]) == "first"
    assert seen == [2]
    assert len([1]) == 1 and builtins.len is REAL_LEN


REAL_LEN = builtins.len

"""A tracing backend on torch.export (non-strict), for Python the concrete tracer cannot follow.

torch.export runs the method with fake tensors and records ATen operations. Its graph is
rebuilt here in the form the rest of torchbend reads: weights as ``get_attr`` of their paths in
the wrapped module (so that weight bending reaches them), one record per node (shape, dtype),
node names taken from the module that ran them (``layers_0`` for the output of ``layers.0``,
``layers_0_pad``... for the operations before it), and torch.export's own guards: sizes of
tensor arguments are left symbolic where the code allows, the program's guard function
decides whether a call's sizes are in its ranges, and the sizes it fixed and the values of
other arguments are facts (other inputs are traced again).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import torch
import torch.fx
from torch import nn

from ..errors import TracingError
from ..tracing import NodeRecord, TracedGraph
from ..tracing.attributes import ModuleState, module_state
from ..tracing.compat import pytree
from ..tracing.facts import Fact
from ..tracing.inspection import is_user_file
from ..tracing.objects import attribute_at, class_key, rebuild_object, rebuilt
from ..tracing.records import set_record
from ..tracing.script import Convertible, attribute_reader
from .backend import ValueHook, call_method

__all__ = ["ExportBackend", "TorchScriptBackend"]


class _Call(nn.Module):
    """``root.<method>`` as a module's forward, for torch.export: by keyword, or positionally
    in the order of ``names`` (torch.export takes dynamic sizes of positional arguments)."""

    def __init__(self, root: nn.Module, method: str, names: list[str] | None = None) -> None:
        super().__init__()
        self.root = root
        self.method = method
        self.names = names or []

    def forward(self, *args: Any, **inputs: Any) -> Any:
        return call_method(self.root, self.method, {**dict(zip(self.names, args)), **inputs})


class ExportBackend:
    """torch.export, non-strict, as a :class:`~torchbend.parts.backend.TracingBackend`.

    Sizes of tensor arguments are left for torch.export to make symbolic where the code allows
    (``Dim.AUTO``): a graph then holds for every size in the ranges torch.export guards
    (``TracedGraph.accepts`` runs its guards), and the sizes it specialized are facts.
    Concrete values are not bent while exporting (``on_value`` is not called): decisions are
    taken on unbent values, and bendings apply in the slots of the graph.
    """

    name = "export"

    def trace(
        self, root: nn.Module, method: str, inputs: dict[str, Any], on_value: ValueHook
    ) -> TracedGraph:
        owner = f"{type(root).__name__}.{method}"
        names = list(inputs)
        values = tuple(inputs.values())
        dynamic = all(v is None or isinstance(v, (torch.Tensor, bool, int, float)) for v in values)
        leaves = [n for n in names if inputs[n] is not None]  # None has no placeholder
        try:
            with _quiet():
                if dynamic:
                    program = _export_dynamic(_Call(root, method, names), values)
                else:  # containers of tensors: every size as it is
                    program = torch.export.export(_Call(root, method), (), inputs, strict=False)
        except Exception as e:
            raise TracingError(
                f"torch.export could not trace {owner}{_user_line(e)}: {_summary(e)}"
            ) from e
        gm = program.module()
        graph, constants = _rebuild(
            gm, root, program.call_spec.out_spec, leaves if dynamic else None
        )
        facts, accepts = _guards(gm, names, leaves) if dynamic else (_signatures(names), None)
        traced = TracedGraph(graph, constants, [], facts)
        traced.accepts = accepts
        # What torch.export does not guard: the plain attributes (modes, flags) of every module
        # (torch.export inlines them all, ``training`` of a batch norm included), and the grad
        # mode, which their code may read.
        traced.module_state = module_state(root.modules())
        traced.grad_mode = torch.is_grad_enabled()
        return traced

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return call_method(root, method, inputs)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without what torch prints while exporting (the partial graph of a failure, the sizes
    it fixed): a failure is an error of its own, and what was fixed is in the guards."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(before)


def _summary(e: BaseException) -> str:
    """``"Type: first line"`` of an error torch raised (its later lines are its own dumps)."""
    first = str(e).strip().split("\n")[0][:300]
    return f"{type(e).__name__}: {first}"


def _user_line(e: BaseException) -> str:
    """``" at model.py:12 (code)"``: the innermost line of the user's code where ``e`` was
    raised, or ``""``."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if is_user_file(f.filename)]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" + (f" ({code})" if code else "")


def _export_dynamic(call: _Call, values: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """``call`` exported with every size of its tensor arguments left to torch.export to make
    symbolic; exported with static sizes if that fails (some code guards on data then)."""
    auto = torch.export.Dim.AUTO
    shapes = tuple(
        {d: auto for d in range(v.ndim)} if isinstance(v, torch.Tensor) and v.ndim else None
        for v in values
    )
    try:
        return torch.export.export(call, values, dynamic_shapes={"args": shapes}, strict=False)
    except Exception:
        return torch.export.export(call, values, strict=False)


def _signatures(names: list[str]) -> tuple[Fact, ...]:
    return tuple((name, "sig", None) for name in names)


def _guards(
    gm: torch.fx.GraphModule, names: list[str], leaves: list[str]
) -> tuple[tuple[Fact, ...], Callable[[Mapping[str, Any]], bool] | None]:
    """The facts of an exported graph's inputs (dtype, rank, the sizes torch.export
    specialized; values of other arguments, ``None`` of those in ``names`` but not in
    ``leaves``) and its guards on the sizes it left symbolic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    check = getattr(gm, "_guards_fn", None)  # without it, every size is a fact
    facts: list[Fact] = [(name, "sig", None) for name in names if name not in leaves]
    symbolic = False
    for name, node in zip(leaves, placeholders):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            facts.append((name, "sig", None))
            continue
        facts += [(name, "dtype", None), (name, "ndim", None)]
        for d, size in enumerate(value.shape):
            if isinstance(size, int) or check is None:
                facts.append((name, "shape", d))
            else:
                symbolic = True
    if not symbolic or check is None:
        return tuple(facts), None

    def accepts(inputs: Mapping[str, Any]) -> bool:
        try:
            check(*(inputs[n] for n in leaves))
        except Exception:  # a guard failed: the graph does not hold for these sizes
            return False
        return True

    return tuple(facts), accepts


class TorchScriptBackend:
    """TorchScript modules (``torch.jit.load``) converted to a torch.export program by torch's
    converter, then read as :class:`ExportBackend` reads exported programs. Any method with
    tensor or scalar arguments converts (``forward``, ``encode``, ``decode``...); the check of
    a new graph runs the file's method on the weights as they are bent."""

    name = "torchscript"

    def __init__(self, module: torch.jit.ScriptModule) -> None:
        self.module = module

    def trace(
        self, root: nn.Module, method: str, inputs: dict[str, Any], on_value: ValueHook
    ) -> TracedGraph:
        # ``root`` holds the file's parameters and buffers, bent or not, by path: graphs read
        # those from it; other tensors the file holds become constants of the graph.
        owner = f"{self.module.original_name}.{method}"
        from ..tracing.compat import ts_converter as TS2EPConverter  # private: see compat

        try:
            prepared = Convertible(self.module, method)
            with warnings.catch_warnings(), _quiet():
                warnings.simplefilter("ignore")  # "Manually populate ... into state_dict"
                program = TS2EPConverter(prepared.holder, tuple(inputs.values())).convert()
        except Exception as e:
            raise TracingError(
                f"torch could not convert TorchScript {owner} to a graph: {_summary(e)}"
            ) from e
        gm = program.module()
        names = list(inputs)
        graph, constants = _rebuild(gm, root, program.call_spec.out_spec, names)
        # The converter exports with symbolic sizes too: its guards say where the graph holds.
        plain = all(isinstance(v, (torch.Tensor, bool, int, float)) for v in inputs.values())
        facts, accepts = _guards(gm, names, names) if plain else (_signatures(names), None)
        traced = TracedGraph(graph, constants, [], facts)
        traced.accepts = accepts
        # The file's plain attributes the graph baked in (its setters may change them).
        traced.module_state = (_script_state(self.module, prepared.attributes),)
        return traced

    def eager(self, root: nn.Module, method: str, inputs: dict[str, Any]) -> Any:
        return self.call(root, method, tuple(inputs.values()), {})

    def call(
        self, root: nn.Module, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The file's method, run on the weights of ``root`` (bent ones written into the
        file's module for the call, then put back)."""
        swapped = []
        for name, p in self.module.named_parameters():
            current = attribute_at(root, name)
            if current is not p:
                swapped.append((p, p.detach().clone()))
                with torch.no_grad():
                    p.copy_(current)
        try:
            return getattr(self.module, method)(*args, **kwargs)
        finally:
            with torch.no_grad():
                for p, saved in swapped:
                    p.copy_(saved)


def _script_state(module: torch.jit.ScriptModule, paths: tuple[str, ...]) -> ModuleState:
    """The guard on a TorchScript module's plain attributes at ``paths`` (its ``__dict__``,
    which :class:`ModuleState` hands to ``read``, does not hold them)."""
    reader = attribute_reader(module, paths)
    return ModuleState(weakref.ref(module), lambda _: reader(), reader())


def _rebuild(
    gm: torch.fx.GraphModule, root: nn.Module, out_spec: Any, inputs: list[str] | None = None
) -> tuple[torch.fx.Graph, dict[str, torch.Tensor]]:
    """The exported graph with plain placeholders (named ``inputs`` in order, if given) and
    output, named and recorded nodes, and weights read from ``root``'s paths; returns it and
    the constants it reads."""
    names = iter(inputs or [])
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    constants: dict[str, torch.Tensor] = {}
    activation_names = _names(list(gm.graph.nodes))

    def arg(a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: env[n])

    for node in gm.graph.nodes:
        if node.op == "call_module":  # torch.export's own input checks (_guards_fn)
            continue
        if node.op == "placeholder":
            name = next(names, str(node.target))
            used = any(u.op != "call_module" for u in node.users)
            if not used and not isinstance(node.meta.get("val"), torch.Tensor):
                continue  # a Python value export baked in (the guards read it)
            new = graph.placeholder(name)
        elif node.op == "output":
            flat = node.args[0]
            flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
            value = pytree.tree_unflatten([arg(v) for v in flat], out_spec)
            graph.output(rebuilt(value, partial(_object_node, graph)))
            continue
        elif node.op == "get_attr":
            target = _strip_root(str(node.target))
            if not _has_attribute(root, target):
                target = re.sub(r"\W", "_", target)
                constants[target] = attribute_at(gm, str(node.target))
            env[node] = graph.get_attr(target)  # weights and constants: not activations
            continue
        else:
            name = activation_names[node]
            # The packet (``aten.linear``), not one overload (``aten.linear.default``): it
            # picks the overload from the arguments, and TorchScript compiles calls to it.
            target = getattr(node.target, "overloadpacket", node.target)
            new = graph.create_node(node.op, target, arg(node.args), arg(node.kwargs), name)
        _record(new, node.meta.get("val"))
        env[node] = new
    graph.lint()
    return graph, constants


def _object_node(
    graph: torch.fx.Graph, cls: type, items: dict[Any, Any] | None, attributes: dict[str, Any]
) -> torch.fx.Node:
    """A node building an object of ``cls`` (a ModelOutput, a dataclass) from nodes."""
    return graph.call_function(rebuild_object, (class_key(cls), items, attributes))


def _strip_root(path: str) -> str:
    return path.removeprefix("root.") if path != "root" else ""


def _module_path(node: torch.fx.Node) -> str:
    """The path of the innermost module that ran ``node`` (``""`` outside any). Where the
    module stack does not say (converted TorchScript), that of the weights it reads."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [_strip_root(str(path)) for path, _ in stack.values()]
    path = next((p for p in reversed(paths) if p), "")
    if not path:
        read = [str(a.target) for a in node.all_input_nodes if a.op == "get_attr"]
        path = next((_strip_root(t).rpartition(".")[0] for t in read if "." in t), "")
    return path


def _names(nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, str]:
    """Activation names: ``layers_0`` for the output of module ``layers.0`` (the last operation
    of a run of operations it ran, as a module call is named in the concrete tracer's graphs),
    ``layers_0_<op>`` for the operations before it; operations outside any module keep
    torch.export's names."""
    calls = [n for n in nodes if n.op in ("call_function", "call_method")]
    paths = [_module_path(n) for n in calls]
    names: dict[torch.fx.Node, str] = {}
    for i, (node, path) in enumerate(zip(calls, paths)):
        if not path:
            names[node] = node.name
            continue
        base = re.sub(r"\W", "_", path)
        last = i + 1 == len(calls) or paths[i + 1] != path
        op = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        names[node] = base if last else f"{base}_{op}"
    return names


def _record(node: torch.fx.Node, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        sizes = [_example(d) for d in value.shape]
        set_record(
            node,
            NodeRecord(
                # A size known only at run time (after ``nonzero``): the shape is unknown.
                shape=None if None in sizes else torch.Size(sizes),  # type: ignore[arg-type]
                dtype=value.dtype,
                device=value.device,
                is_tensor=True,
            ),
        )


def _example(size: int | torch.SymInt) -> int | None:
    """The size a symbolic dimension had on the example inputs (what tables show), or ``None``
    for a size that depends on data."""
    if isinstance(size, int):
        return size
    hint = size.node.hint
    return int(hint) if hint is not None else None


def _has_attribute(root: nn.Module, path: str) -> bool:
    try:
        attribute_at(root, path)
    except AttributeError:
        return False
    return True

"""Real third-party models: traced, bent, reset and bent again from a saved configuration."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from models import ALL, KNOWN_FAILING, MODELS, ZooModel
from zoo_helpers import identical, same

import torchbend as tb


def _seeded(bended: tb.BendedModule, method: str, inputs) -> object:
    torch.manual_seed(0)
    return bended.call(method, **inputs)


def _middle_activation(bended: tb.BendedModule, model: ZooModel, inputs, eager) -> str:
    """A floating-point activation from the middle of the graph whose zeroing changes the
    output (the nearest to the middle that does). Shapes with a data-dependent size (an
    unbacked ``SymInt`` from ``torch.export``, e.g. after ``nonzero``) are skipped."""
    names = [
        a.name
        for a in bended.activations(model.method)
        if a.op != "placeholder"
        and isinstance(a.shape, torch.Size)
        and all(isinstance(size, int) for size in a.shape)
        and a.shape.numel() > 1
        and isinstance(a.dtype, torch.dtype)
        and a.dtype.is_floating_point
    ]
    middle = len(names) // 2
    for name in sorted(names, key=lambda n: abs(names.index(n) - middle))[:10]:
        bended.bend(tb.Scale(0.0), f"{model.method}:{re.escape(name)}$")
        changed = not identical(_seeded(bended, model.method, inputs), eager)
        bended.reset()
        if changed:
            return name
    raise AssertionError(f"no activation near the middle of {model.name} changes its output")


def test_registry_is_consistent():
    names = [m.name for m in ALL]
    assert len(names) == len(set(names))
    assert set(KNOWN_FAILING) <= set(names)


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_trace_bend_reset_and_reload(model: ZooModel, tmp_path):
    if not model.available:
        pytest.skip(f"{model.library} is not installed (pip install -e '.[dev]')")
    module, inputs = model.build()
    torch.manual_seed(0)  # stochastic models (VITS draws noise) draw the same in every call
    eager = getattr(module, model.method)(**inputs)
    bended = tb.BendedModule(module, backend="auto")
    bended.trace(model.method, **inputs)
    plain = _seeded(bended, model.method, inputs)
    assert same(plain, eager), f"{model.name}: traced output differs from eager"

    name = model.bend or _middle_activation(bended, model, inputs, eager)
    bended.bend(tb.Scale(0.0), f"{model.method}:{re.escape(name)}$")
    bent = _seeded(bended, model.method, inputs)
    assert not identical(bent, plain)

    bended.reset()
    assert identical(_seeded(bended, model.method, inputs), plain), "reset() is not bit-exact"

    bended.bend(tb.Scale(0.0), f"{model.method}:{re.escape(name)}$")
    path = tmp_path / "bends.json"
    bended.bending_config().save(path)
    fresh_module, _ = model.build()
    getattr(fresh_module, model.method)(**inputs)  # as the first one (RWKV rescales at first)
    fresh = tb.BendedModule(fresh_module, backend="auto")
    fresh.trace(model.method, **inputs)
    assert fresh.bend(tb.BendingConfig.load(path))
    reloaded = _seeded(fresh, model.method, inputs)
    assert identical(reloaded, bent), "a reloaded config does not reproduce the bent output"


def test_docs_table_lists_the_zoo():
    """docs/tracing.md has a row per model (rewrite it with scripts/zoo_third_party.py)."""
    page = (Path(__file__).parents[2] / "docs" / "tracing.md").read_text()
    section = page.split("<!-- zoo_third_party:")[1].split("<!-- /zoo_third_party -->")[0]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    rows = [line.split("|")[1].strip().strip("`") for line in lines]
    assert rows == [m.name for m in ALL]
    failures = section.split("Known failures:")[-1] if KNOWN_FAILING else ""
    assert all(f"`{name}`" in failures for name in KNOWN_FAILING)
    # every model plain torch.export traces, torchbend traces too (issue 31)
    for line in lines:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        auto, exported = cells[5], cells[7]
        assert not exported.startswith("✓") or auto.startswith("✓"), line


def _read_by_layers(bended: tb.BendedModule, model: ZooModel, module: torch.nn.Module) -> list[str]:
    """Activations of fixed float shape read by a convolution or a Linear of ``module``."""
    from torchbend.engine.folding import layer_kind

    found = []
    for node in bended.graph(model.method).nodes:
        shape = node.meta.get("torchbend")
        shape = getattr(shape, "shape", None)
        if not isinstance(shape, torch.Size) or not all(isinstance(s, int) for s in shape):
            continue
        for user in node.users:
            if user.op == "call_module" and layer_kind(module.get_submodule(str(user.target))):
                found.append(node.name)
                break
    return found


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_bendings_folded_into_layers_compute_what_their_slots_compute(model: ZooModel):
    if not model.available:
        pytest.skip(f"{model.library} is not installed (pip install -e '.[dev]')")
    module, inputs = model.build()
    getattr(module, model.method)(**inputs)  # as the test above: caches filled once
    bended = tb.BendedModule(module, backend="auto")
    bended.trace(model.method, **inputs)
    names = _read_by_layers(bended, model, module)[:20]
    if not names:
        pytest.skip(f"no activation of {model.name} is read by a convolution or a Linear")
    pattern = "|".join(f"{model.method}:{re.escape(n)}$" for n in names)
    bended.bend(tb.Scale(0.75), pattern)
    with torch.enable_grad():  # the slots
        slots = _seeded(bended, model.method, inputs)
    with torch.no_grad():  # the folds, where they hold
        folded = _seeded(bended, model.method, inputs)
    assert same(folded, slots), f"{model.name}: folded bendings differ from their slots"


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_bending_options_and_aliases_on_third_party_models(model: ZooModel, tmp_path):
    """blend, subset and guard on an alias of a middle activation: blend=0 is the model itself
    bit for bit, the options reload from a saved config, and the model's weights never move."""
    if not model.available:
        pytest.skip(f"{model.library} is not installed (pip install -e '.[dev]')")
    module, inputs = model.build()
    weights = {k: v.detach().clone() for k, v in module.state_dict().items()}
    torch.manual_seed(0)
    eager = getattr(module, model.method)(**inputs)
    bended = tb.BendedModule(module, backend="auto")
    bended.trace(model.method, **inputs)
    plain = _seeded(bended, model.method, inputs)
    name = model.bend or _middle_activation(bended, model, inputs, eager)
    bended.mark("mid", f"{bended.view().key(model.method)}:{name}")

    bended.bend(tb.Scale(0.0), "#mid", blend=0.0)
    assert identical(_seeded(bended, model.method, inputs), plain), "blend=0 is not the identity"
    bended.reset()
    bended.bend(tb.Noise(std=0.5, seed=0), "#mid", blend=0.5, subset=0.5, guard=True)
    bent = _seeded(bended, model.method, inputs)
    assert not identical(bent, plain)
    path = tmp_path / "options.json"
    bended.bending_config().save(path)
    bended.reset()
    assert identical(_seeded(bended, model.method, inputs), plain), "reset() is not bit-exact"
    bended.bend(tb.BendingConfig.load(path))
    assert identical(_seeded(bended, model.method, inputs), bent), "options do not reload"
    for key, value in module.state_dict().items():
        assert torch.equal(value, weights[key]), f"{model.name}: bending changed {key}"

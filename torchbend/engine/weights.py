"""Weight bending: bent copies of weights, and the bent module: the wrapped module with them in
place, which graphs read their weights from."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import torch
from torch import nn

from ..errors import BendingError

__all__ = ["CopySync", "WeightBank", "WeightBender", "module_with", "weight_holder"]


class WeightBender(Protocol):
    """What the weight bank needs of the owner of bendings: which weights are bent, and how."""

    def weights(self) -> list[str]:
        """The bent weights, in the order they were bent."""
        ...

    def bend_weight(self, name: str, weight: torch.Tensor) -> torch.Tensor:
        """``weight`` bent by every bending of weight ``name``, in order."""
        ...


def weight_holder(module: nn.Module) -> nn.Module:
    """The module whose parameters a :class:`WeightBank` reads, and replaces in the bent module.

    ``module`` itself, except for a TorchScript module, which cannot be copied shallowly: for
    it, a plain module tree holding the very same parameters and buffers under the same paths
    (graphs of TorchScript modules read their weights by path, see the torchscript backend).
    """
    if not isinstance(module, torch.jit.ScriptModule):
        return module
    holder = nn.Module()
    for kind, named in (
        ("_parameters", module.named_parameters()),
        ("_buffers", module.named_buffers()),
    ):
        for path, tensor in named:
            owner = holder
            *heads, leaf = path.split(".")
            for head in heads:
                if head not in owner._modules:
                    owner._modules[head] = nn.Module()
                owner = owner._modules[head]  # type: ignore[assignment]
            if kind == "_parameters" and not isinstance(tensor, nn.Parameter):
                tensor = nn.Parameter(tensor, requires_grad=tensor.requires_grad)  # same storage
            getattr(owner, kind)[leaf] = tensor
    return holder


def module_with(
    module: nn.Module,
    replaced: Mapping[str, torch.Tensor],
    copies: list[tuple[nn.Module, nn.Module]] | None = None,
) -> nn.Module:
    """A shallow copy of ``module`` whose parameters named in ``replaced`` are swapped.

    Only the modules on the path to a replaced parameter are copied (each added to ``copies``
    with its original, if given); everything else (other parameters, buffers, hooks,
    submodules) is shared with ``module``, which is left untouched.
    """
    if not replaced:
        return module
    # Not copy.copy: parametrized modules refuse to be pickled, and copying goes that way.
    copy = object.__new__(type(module))
    copy.__dict__.update(module.__dict__)
    if copies is not None:
        copies.append((copy, module))
    copy._parameters = dict(module._parameters)  # type: ignore[assignment]
    copy._modules = dict(module._modules)  # type: ignore[assignment]
    children: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in replaced.items():
        head, _, rest = name.partition(".")
        if rest:
            children.setdefault(head, {})[rest] = tensor
        else:
            copy._parameters[head] = tensor  # type: ignore[assignment]
    for head, sub in children.items():
        child = module._modules[head]
        assert child is not None
        copy._modules[head] = module_with(child, sub, copies)
    return copy


class CopySync:
    """Gives copies of modules (made by :func:`module_with`) the attributes their originals
    have now (``training`` switched on a submodule, a flag set), but their own parameters and
    submodules.

    It runs before every call of a graph that reads the copies, so the usual case, nothing
    changed, is one comparison of each original's attributes with those it last gave (in C:
    the same objects, or equal values, pass).
    """

    def __init__(self, copies: list[tuple[nn.Module, nn.Module]]) -> None:
        self._pairs = [(copy.__dict__, original.__dict__) for copy, original in copies]
        self._given: list[tuple[Callable[[dict[str, Any]], Any], Any, int] | None]
        self._given = [None] * len(self._pairs)
        """For each copy, what its original's attributes were when last given to it: a reader
        of them, their values and how many attributes there were."""

    def __call__(self) -> None:
        for i, (mine, theirs) in enumerate(self._pairs):
            given = self._given[i]
            if given is not None and len(theirs) == given[2]:
                try:
                    if given[0](theirs) == given[1]:
                        continue
                except RuntimeError:  # a tensor attribute replaced: compared by value
                    pass
            for key, value in theirs.items():
                if mine.get(key) is not value and key not in _OWN:
                    mine[key] = value
            read = operator.itemgetter(*[k for k in theirs if k not in _OWN])
            self._given[i] = (read, read(theirs), len(theirs))

    def give_back(self) -> None:
        """Give the originals the attributes set on their copies since (a method of the
        wrapped module run on the bent module, such as ``set_streaming``), as such a method
        sets them on the modules it shares with it: a flag then outlives the copies, which
        the next bending makes again from the originals. Parameters are never given back."""
        for mine, theirs in self._pairs:
            for key, value in mine.items():
                if key not in _OWN and theirs.get(key, _ABSENT) is not value:
                    theirs[key] = value


_OWN = frozenset({"_parameters", "_modules"})
_ABSENT = object()


class WeightBank:
    """Keeps bent weights apart from the wrapped module's own parameters.

    Bendings apply to *base* weights: the wrapped module's own (version ``"original"``), those
    of another version, or a mix of versions. ``bent_module`` is the module as the bended
    graphs see it: the wrapped module itself when nothing differs, else a shallow copy whose
    differing parameters are replaced (see :func:`module_with`).

    Args:
        module: the module whose parameters are bent (see :func:`weight_holder`).
        bender: which weights are bent and how (the bending set); ``None``: nothing is bent.
        on_change: called with each new ``bent_module``, to point the graphs compiled
            against the old one at it.
    """

    ORIGINAL = "original"

    def __init__(
        self,
        module: nn.Module,
        bender: WeightBender | None = None,
        on_change: Callable[[nn.Module], None] | None = None,
    ) -> None:
        self.module = module
        self._bender = bender
        self._on_change = on_change
        self.bent: dict[str, nn.Parameter] = {}
        self.base: dict[str, torch.Tensor] = {}
        """Weights replacing the originals before bending (from a version or a mix)."""
        self.versions: dict[str, dict[str, torch.Tensor]] = {}
        self.bent_module: nn.Module = module
        self._sync = CopySync([])
        """Gives the modules ``bent_module`` copies the attributes of their originals."""
        self.active = self.ORIGINAL
        """Name of the version bendings apply to (its weights, or a mix, are ``base``)."""
        self._aliases: dict[str, list[str]] = {}
        by_id: dict[int, list[str]] = {}
        for name, p in module.named_parameters(remove_duplicate=False):
            by_id.setdefault(id(p), []).append(name)
        for names in by_id.values():
            for name in names:
                self._aliases[name] = names

    def names(self) -> list[str]:
        return [name for name, _ in self.module.named_parameters()]

    def original(self, name: str) -> nn.Parameter:
        return self.module.get_parameter(name)

    def base_weight(self, name: str) -> torch.Tensor:
        """The weight bendings apply to: the active version's, or the original."""
        return self.base.get(name, self.original(name))

    def current(self, name: str) -> torch.Tensor:
        return self.bent.get(name, self.base_weight(name))

    def base_of(self, version: str) -> dict[str, torch.Tensor]:
        """What ``rebase`` takes to make bendings apply to ``version``."""
        if version not in self.names_of_versions():
            raise BendingError(f"no version {version!r}; versions: {self.names_of_versions()}")
        return {} if version == self.ORIGINAL else self.versions[version]

    def version_weights(self, version: str) -> dict[str, torch.Tensor]:
        if version == self.ORIGINAL:
            return {name: self.original(name).detach() for name in self.names()}
        return self.versions[version]

    def set(self, bent: Mapping[str, torch.Tensor]) -> None:
        """Replace all bent weights (an empty mapping restores the originals)."""
        self.bent = {name: self._parameter(name, t) for name, t in bent.items()}
        self.refresh()

    # -- versions ------------------------------------------------------------------------------

    def names_of_versions(self) -> list[str]:
        return [self.ORIGINAL, *self.versions]

    def write(self, version: str) -> None:
        """Freeze the current weights (bendings included) as ``version``."""
        if version == self.ORIGINAL:
            raise BendingError(
                f"version {version!r} is the wrapped module's own; pick another name"
            )
        self.versions[version] = {
            name: self.current(name).detach().clone() for name in self.names()
        }
        self._follow(version)

    def import_version(
        self, version: str, state: Mapping[str, torch.Tensor], strict: bool = True
    ) -> None:
        """Keep the weights of another checkpoint (same names and shapes) as ``version``."""
        names = self.names()
        missing = [n for n in names if n not in state]
        others = set(self.module.state_dict())
        unexpected = [k for k in state if k not in names and k not in others]
        mismatched = [
            f"{n}: {list(state[n].shape)} vs {list(self.original(n).shape)}"
            for n in names
            if n in state and state[n].shape != self.original(n).shape
        ]
        if mismatched or (strict and (missing or unexpected)):
            hint = (
                "" if mismatched else "; pass strict=False to keep the originals for missing ones"
            )
            raise BendingError(
                f"version {version!r} does not fit {type(self.module).__name__}: "
                f"missing {missing}, unexpected {unexpected}, shape mismatch {mismatched}{hint}"
            )
        self.versions[version] = {
            n: state[n].detach().to(self.original(n)) if n in state else self.original(n).detach()
            for n in names
        }
        self._follow(version)

    def _follow(self, version: str) -> None:
        """Bendings apply to the new weights of ``version`` if it is the active one."""
        if version == self.active:
            self.rebase(version, self.versions[version])

    def mix(self, weights: Mapping[str, float]) -> dict[str, torch.Tensor]:
        """The normalized weighted mix of versions' weights."""
        known = self.names_of_versions()
        unknown = [v for v in weights if v not in known]
        if unknown or not weights:
            raise BendingError(
                f"interpolate() takes weights of versions {known}, got {sorted(weights)}"
            )
        total = sum(weights.values())
        if total == 0:
            raise BendingError(f"interpolate() weights sum to 0: {dict(weights)}")
        mixed: dict[str, torch.Tensor] = {}
        for version, w in weights.items():
            for name, t in self.version_weights(version).items():
                mixed[name] = mixed[name] + t * (w / total) if name in mixed else t * (w / total)
        return mixed

    def set_base(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Replace the base weights (a version's, or a mix); ``{}`` means the originals."""
        self.base = {name: self._parameter(name, t) for name, t in weights.items()}

    def _parameter(self, name: str, tensor: torch.Tensor) -> nn.Parameter:
        """``tensor`` as a parameter that needs gradients if the weight it replaces does:
        modules choose kernels by it (``nn.MultiheadAttention`` takes a fused path when no
        weight needs one), and a bent model must run the original's."""
        if isinstance(tensor, nn.Parameter):
            return tensor
        wanted = self.original(name).requires_grad and tensor.is_floating_point()
        return nn.Parameter(tensor.detach(), requires_grad=wanted)

    def synced_module(self) -> nn.Module:
        """``bent_module``, its copied modules given the attributes the wrapped module's have
        now: graphs run on it, and guards read the modes and flags there."""
        self._sync()
        return self.bent_module

    def give_back(self) -> None:
        """Set on the wrapped module's modules the attributes set on their copies in
        ``bent_module``
        (see :meth:`CopySync.give_back`)."""
        self._sync.give_back()

    def refresh(self) -> None:
        """Rebuild ``bent_module`` (after bending, a device move or a train/eval switch)."""
        weights = {**self.base, **self.bent}
        replaced = {alias: t for name, t in weights.items() for alias in self._aliases[name]}
        copies: list[tuple[nn.Module, nn.Module]] = []
        self.bent_module = module_with(self.module, replaced, copies)
        self._sync = CopySync(copies)
        if self._on_change is not None:
            self._on_change(self.bent_module)

    # -- bending -------------------------------------------------------------------------------

    def rebend(self, names: Iterable[str]) -> None:
        """Bend weights ``names`` again from their base."""
        bent: dict[str, torch.Tensor] = dict(self.bent)
        bender = self._bender
        with torch.no_grad():
            for name in names:
                # A copy: a callback that edits its input in place must not reach the base
                # weights (the wrapped module's own, or a version's).
                weight = self.base_weight(name).detach().clone()
                bent[name] = weight if bender is None else bender.bend_weight(name, weight)
        self.set(bent)

    def crossfade(
        self, before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor], k: float
    ) -> None:
        """Use ``(1 - k) * before + k * after`` for the weights of ``before``."""
        mixed: dict[str, torch.Tensor] = dict(self.bent)
        for name in before:
            mixed[name] = torch.lerp(before[name].detach(), after[name].detach(), k)
        self.set(mixed)

    def rebase(self, version: str, base: Mapping[str, torch.Tensor]) -> Callable[[], None]:
        """Make ``base`` (version ``version``'s weights, or a mix; ``{}``: the originals) what
        bendings apply to, bend the bent weights again on it, and return what undoes it."""
        previous = (self.active, dict(self.base))
        self.active = version
        self.set_base(base)
        self.bent = {}
        self.rebend(self._bender.weights() if self._bender is not None else [])
        return lambda: self._restore(*previous)

    def _restore(self, version: str, base: Mapping[str, torch.Tensor]) -> None:
        self.rebase(version, base)

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply ``fn`` to every kept tensor (a device or dtype move of the wrapped module)."""
        self.versions = {v: {k: fn(t) for k, t in ws.items()} for v, ws in self.versions.items()}
        self.set_base({k: fn(v.detach()) for k, v in self.base.items()})
        self.set({k: fn(v.detach()) for k, v in self.bent.items()})

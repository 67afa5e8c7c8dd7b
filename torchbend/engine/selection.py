"""Selection of bending targets: regular expressions over weight and activation names."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import SelectionError, did_you_mean

__all__ = ["Aliases", "Selection", "filter_names", "matches", "select"]

_SCOPED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(.*)$")
_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Aliases:
    """Names given to targets (``bended.mark("latent", "encoder_11")``): ``"#latent"`` in a
    pattern stands for the target, exactly."""

    def __init__(self) -> None:
        self.targets: dict[str, str] = {}
        """The target of each alias: a weight name, or ``"<method>:<node>"``."""

    def mark(self, alias: str, target: str, keys: Sequence[str], used: Iterable[str] = ()) -> None:
        """Name ``target`` (one of ``keys``, the bendable targets) ``alias``; an alias that
        bendings in ``used`` patterns use keeps its target."""
        if not isinstance(alias, str) or not _ALIAS.match(alias.removeprefix("#")):
            raise SelectionError(
                f"an alias is a name made of letters, digits and _ (not starting with a digit), "
                f"got {alias!r}"
            )
        alias = alias.removeprefix("#")
        if target not in keys:
            raise SelectionError(
                f"cannot mark {target!r}: it is not a weight or an activation of this module "
                "(activations as '<method>:<node>', or a node of forward)"
                + did_you_mean(target, list(keys), 3)
            )
        before = self.targets.get(alias)
        if before not in (None, target) and f"#{alias}" in used:
            raise SelectionError(
                f"alias #{alias} stands for {before!r} in bendings applied; reset() before "
                f"pointing it at {target!r}"
            )
        self.targets[alias] = target

    def expand(self, patterns: Sequence[str]) -> tuple[str, ...]:
        """``patterns`` with each ``"#alias"`` replaced by a pattern matching its target only."""
        expanded = []
        for pattern in patterns:
            if isinstance(pattern, str) and pattern.startswith("#"):
                alias = pattern[1:]
                if alias not in self.targets:
                    known = ", ".join(f"#{a}" for a in sorted(self.targets)) or "none"
                    raise SelectionError(
                        f"no alias {pattern!r}; known aliases: {known}. Name a target with "
                        f"bended.mark({alias!r}, '<target>')"
                        + did_you_mean(alias, list(self.targets))
                    )
                target = self.targets[alias]
                scope, _, node = target.rpartition(":")
                pattern = f"{scope}:^{re.escape(node)}$" if scope else f"^{re.escape(target)}$"
            expanded.append(pattern)
        return tuple(expanded)

    def of(self, target: str) -> list[str]:
        """The aliases of ``target``, as ``"#name"``."""
        return [f"#{a}" for a, t in self.targets.items() if t == target]


@dataclass
class Selection:
    """The targets a set of patterns selected."""

    weights: list[str] = field(default_factory=list)
    """Dotted parameter names, in model order."""
    activations: dict[str, list[str]] = field(default_factory=dict)
    """Graph node names, per traced method."""

    def keys(self) -> list[str]:
        """Weight names, then activations as ``"<method>:<node>"``."""
        return self.weights + [f"{fn}:{n}" for fn, names in self.activations.items() for n in names]


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise SelectionError(
            f"pattern {pattern!r} is not a valid regular expression: {e}"
        ) from None


def _parse(
    pattern: str, methods: Iterable[str], fns: set[str] | None
) -> tuple[set[str], re.Pattern[str], bool]:
    """Return (methods whose activations it may match, regex, whether it matches weights)."""
    if not isinstance(pattern, str):
        raise SelectionError(f"patterns must be strings, got {type(pattern).__name__}: {pattern!r}")
    methods = set(methods)
    scoped = _SCOPED.match(pattern)
    if scoped and scoped.group(1) in methods:
        return {scoped.group(1)}, _compile(scoped.group(2)), False
    return (fns if fns is not None else methods), _compile(pattern), True


def matches(patterns: Sequence[str], method: str, node: str, fns: set[str] | None = None) -> bool:
    """Whether activation ``node`` of ``method`` is selected by any of ``patterns``."""
    for pattern in patterns:
        scope, regex, _ = _parse(pattern, {method}, fns)
        if method in scope and regex.match(node):
            return True
    return False


def select(
    patterns: Sequence[str],
    weights: Sequence[str],
    activations: Mapping[str, Sequence[str]],
    fn: str | Iterable[str] | None = None,
    owner: str = "the module",
) -> Selection:
    """Match ``patterns`` (``re.match``) against weight names and activation names.

    A pattern ``"encode:conv$"`` only matches activations of the traced method ``encode``.
    ``fn`` restricts unscoped patterns to the activations of those methods. Every pattern must
    match something, else a :class:`SelectionError` lists the closest names.
    """
    if isinstance(fn, str):
        fns: set[str] | None = {fn}
    else:
        fns = None if fn is None else set(fn)
    unknown = sorted((fns or set()) - set(activations))
    if unknown:
        raise SelectionError(
            f"method(s) {unknown} of {owner} were not traced; traced methods: "
            f"{sorted(activations) or 'none'}. Trace first with bended.trace('{unknown[0]}', ...)."
        )
    chosen_w: set[str] = set()
    chosen_a: dict[str, set[str]] = {}
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise SelectionError(
                f"patterns must be strings, got {type(pattern).__name__}: {pattern!r}"
            )
        if not pattern or (pattern.endswith(":") and pattern[:-1] in activations):
            raise SelectionError(
                f"the empty pattern {pattern!r} would match every weight and activation of "
                f"{owner}; write '.*' to select everything on purpose"
            )
        scoped = _SCOPED.match(pattern)
        if scoped and scoped.group(1) in activations:
            scope, regex = {scoped.group(1)}, _compile(scoped.group(2))
            match_weights = False
        else:
            scope = fns if fns is not None else set(activations)
            regex, match_weights = _compile(pattern), True
        found = False
        if match_weights:
            for w in weights:
                if regex.match(w):
                    chosen_w.add(w)
                    found = True
        for method in scope:
            for node in activations[method]:
                if regex.match(node):
                    chosen_a.setdefault(method, set()).add(node)
                    found = True
        if not found:
            names = list(weights) + [n for m in scope for n in activations[m]]
            raise SelectionError(
                f"pattern {pattern!r} matched no weight or activation of {owner}"
                + did_you_mean(pattern, names, 3)
                + (
                    f" (searched activations of {sorted(scope)})"
                    if scope
                    else " (no method is traced, so only weights were searched)"
                )
            )
    return Selection(
        weights=[w for w in weights if w in chosen_w],
        activations={
            m: [n for n in activations[m] if n in chosen_a[m]] for m in activations if m in chosen_a
        },
    )


def filter_names(
    names: Iterable[str],
    flt: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
) -> list[str]:
    """Keep names matching any ``flt`` pattern and none of the ``exclude`` patterns."""
    flts = [flt] if isinstance(flt, str) else list(flt or [])
    excl = [exclude] if isinstance(exclude, str) else list(exclude or [])
    keep = [_compile(p) for p in flts]
    drop = [_compile(p) for p in excl]
    return [
        n
        for n in names
        if (not keep or any(p.match(n) for p in keep)) and not any(p.match(n) for p in drop)
    ]

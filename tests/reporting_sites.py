"""The reporting sites of a suite's checks: each place in the source that builds a problem.

Strategy: a check id can report from several places (one per way the contract is
broken), and a mutant that one of them catches proves nothing of the others. So the
sabotage tests work per site, not per id. A site is found in the source by its syntax
(each call of the problem class, ``LoopProblem(...)``, in a check module) and named by
its module, its function and its place among that function's sites
(``abort.check_after_cancel#1``), so that a name survives lines added above it. While
a case runs, the problem class is swapped, in each check module, for a factory that
marks each problem with the site that built it (the innermost site whose lines hold
the caller's current line); the checks' results can then be read per site, and a site
taken out: its problems dropped, as if the branch that reports them were gone.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple
from unittest import mock


@dataclass(frozen=True)
class Site:
    """One call of the problem class in a check module."""

    name: str
    module: str
    first: int
    last: int


def find_sites(modules: Sequence[ModuleType], problem: str) -> List[Site]:
    """Every call of ``problem`` (a class name) in ``modules``' source, in source order."""
    sites: List[Site] = []
    for module in modules:
        path = Path(module.__file__ or "")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        short = module.__name__.rsplit(".", 1)[-1]
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [
                node
                for node in ast.walk(function)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == problem
            ]
            calls.sort(key=lambda node: (node.lineno, node.col_offset))
            for index, call in enumerate(calls, 1):
                end = getattr(call, "end_lineno", None) or call.lineno
                sites.append(Site(f"{short}.{function.name}#{index}", module.__name__, call.lineno, end))
    # A nested function's calls are found under it and under its parent: keep the innermost.
    kept: Dict[Tuple[str, int], Site] = {}
    for site in sites:
        key = (site.module, site.first)
        if key not in kept or len(site.name) > len(kept[key].name):
            kept[key] = site
    return sorted(kept.values(), key=lambda s: (s.module, s.first))


class SiteWatch:
    """Marks each problem a check builds with its site, and drops those of the sites taken out.

    ``modules`` are the check modules (each imports the problem class by name);
    ``problem_class`` is that class. Thread-safe: the sites taken out, and the sites seen,
    are each thread's own, so cases may run side by side.
    """

    def __init__(self, modules: Sequence[ModuleType], problem_class: type) -> None:
        self.modules = list(modules)
        self.problem_class = problem_class
        self.sites = find_sites(self.modules, problem_class.__name__)
        self._by_module: Dict[str, List[Site]] = {}
        for site in self.sites:
            self._by_module.setdefault(site.module, []).append(site)
        self._local = threading.local()

    def site_of(self, module: str, line: int) -> Optional[Site]:
        for site in self._by_module.get(module, ()):
            if site.first <= line <= site.last:
                return site
        return None

    def _factory(self, module: str) -> Callable[..., Any]:
        cls = self.problem_class

        def make(*args: Any, **kwargs: Any) -> Any:
            problem = cls(*args, **kwargs)
            caller = sys._getframe(1)
            site = self.site_of(module, caller.f_lineno)
            object.__setattr__(problem, "site", site.name if site is not None else f"{module}:?")
            return problem

        return make

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The factory in place of the problem class in every check module, for the block."""
        with contextlib.ExitStack() as stack:
            for module in self.modules:
                stack.enter_context(mock.patch.object(module, self.problem_class.__name__, self._factory(module.__name__)))
            yield

    @contextlib.contextmanager
    def without(self, *names: str) -> Iterator[None]:
        """Within the block, in this thread, the problems of the sites ``names`` are dropped."""
        old = getattr(self._local, "out", frozenset())
        self._local.out = frozenset(names) | old
        try:
            yield
        finally:
            self._local.out = old

    def keep(self, problems: List[Any]) -> List[Any]:
        """``problems`` without those of the sites taken out in this thread; the rest noted as seen."""
        out: FrozenSet[str] = getattr(self._local, "out", frozenset())
        kept = [p for p in problems if getattr(p, "site", None) not in out]
        seen: Set[str] = getattr(self._local, "seen", set())
        seen.update(str(getattr(p, "site", "")) for p in kept)
        return kept

    @contextlib.contextmanager
    def recording(self) -> Iterator[Set[str]]:
        """The sites whose problems were kept in this thread within the block."""
        seen: Set[str] = set()
        self._local.seen = seen
        try:
            yield seen
        finally:
            self._local.seen = set()

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
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple
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


class _Switches:
    """Which sites are taken out, and which reported, each thread's own, so that cases may
    run side by side: the part both kinds of site finder share."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _out(self) -> FrozenSet[str]:
        out: FrozenSet[str] = getattr(self._local, "out", frozenset())
        return out

    def _note(self, names: Iterable[str]) -> None:
        """Note ``names`` as seen, where this thread is recording."""
        seen: Optional[Set[str]] = getattr(self._local, "seen", None)
        if seen is not None:
            seen.update(names)

    @contextlib.contextmanager
    def without(self, *names: str) -> Iterator[None]:
        """Within the block, in this thread, the sites ``names`` report nothing."""
        old = self._out()
        self._local.out = frozenset(names) | old
        try:
            yield
        finally:
            self._local.out = old

    @contextlib.contextmanager
    def recording(self) -> Iterator[Set[str]]:
        """The sites that reported in this thread within the block."""
        seen: Set[str] = set()
        self._local.seen = seen
        try:
            yield seen
        finally:
            self._local.seen = None


class SiteWatch(_Switches):
    """Marks each problem a check builds with its site, and drops those of the sites taken out.

    ``modules`` are the check modules (each imports the problem class by name);
    ``problem_class`` is that class. Thread-safe: the sites taken out, and the sites seen,
    are each thread's own, so cases may run side by side.
    """

    def __init__(self, modules: Sequence[ModuleType], problem_class: type) -> None:
        super().__init__()
        self.modules = list(modules)
        self.problem_class = problem_class
        self.sites = find_sites(self.modules, problem_class.__name__)
        self._by_module: Dict[str, List[Site]] = {}
        for site in self.sites:
            self._by_module.setdefault(site.module, []).append(site)

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
                factory = self._factory(module.__name__)
                stack.enter_context(mock.patch.object(module, self.problem_class.__name__, factory))
            yield

    def keep(self, problems: List[Any]) -> List[Any]:
        """``problems`` without those of the sites taken out in this thread; the rest noted as seen."""
        out = self._out()
        kept = [p for p in problems if getattr(p, "site", None) not in out]
        self._note(str(getattr(p, "site", "")) for p in kept)
        return kept


def _is_text(node: ast.expr) -> bool:
    """Whether ``node`` builds words: a string, an f-string, or a sum or call holding one."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return False


def _reports(node: ast.expr) -> bool:
    """Whether a returned or appended value is a list of problems made here (words, not data)."""
    if isinstance(node, ast.List):
        return bool(node.elts) and all(_is_text(e) for e in node.elts)
    if isinstance(node, ast.ListComp):
        return _is_text(node.elt)
    if isinstance(node, ast.IfExp):
        return _reports(node.body) or _reports(node.orelse)
    return False


class _Planting(ast.NodeTransformer):
    """Wraps each site's value in ``__site__(name, value)``; ``problems.append(x)`` becomes
    ``problems.extend(__site__(name, [x]))``."""

    def __init__(self, short: str, helpers: Sequence[str]) -> None:
        self.short = short
        self.helpers = set(helpers)
        self.function: List[str] = []
        self.counts: Dict[str, int] = {}
        self.sites: List[Tuple[str, int, int]] = []

    def _name(self, node: ast.AST) -> str:
        function = self.function[-1] if self.function else "<module>"
        self.counts[function] = self.counts.get(function, 0) + 1
        name = f"{self.short}.{function}#{self.counts[function]}"
        first: int = getattr(node, "lineno", 0)
        end: int = getattr(node, "end_lineno", None) or first
        self.sites.append((name, first, end))
        return name

    def _wrap(self, name: str, value: ast.expr) -> ast.expr:
        call = ast.Call(ast.Name("__site__", ast.Load()), [ast.Constant(name), value], [])
        return ast.copy_location(call, value)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.function.append(node.name)
        self.generic_visit(node)
        self.function.pop()
        return node

    def _in_helper(self) -> bool:
        return bool(self.function) and self.function[-1] in self.helpers

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if node.value is not None and _reports(node.value) and not self._in_helper():
            node.value = self._wrap(self._name(node), node.value)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and len(call.args) == 1
            and _is_text(call.args[0])
            and not self._in_helper()
        ):
            listed = ast.copy_location(ast.List([call.args[0]], ast.Load()), call.args[0])
            call.func.attr = "extend"
            call.args = [self._wrap(self._name(node), listed)]
        return node


class CheckSites(_Switches):
    """The reporting sites of check modules whose checks return their problems as words.

    Each site (a ``return [...]`` of words, or ``problems.append(words)``) is found in the
    source and planted with a marker in a copy of its module, run in place of the
    original while :meth:`installed`: a site taken out (:meth:`without`) then reports
    nothing, as if its branch were gone, and each site that reports is noted
    (:meth:`recording`). ``rows`` names each module's table of checks and ``table`` is
    the table the suite runs, whose entries are swapped for the planted ones;
    ``helpers`` are functions whose words are parts of a message, not problems.
    """

    def __init__(
        self,
        modules: Sequence[ModuleType],
        table: Dict[str, Any],
        rows: str = "ROWS",
        helpers: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.modules = list(modules)
        self.table = table
        self.rows = rows
        self.sites: List[Site] = []
        self._planted: List[Dict[str, Any]] = []
        for module in self.modules:
            path = Path(module.__file__ or "")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            planting = _Planting(module.__name__.rsplit(".", 1)[-1], helpers)
            tree = ast.fix_missing_locations(planting.visit(tree))
            namespace: Dict[str, Any] = dict(vars(module))
            namespace["__site__"] = self._site
            exec(compile(tree, str(path), "exec"), namespace)  # noqa: S102 - the project's own source
            self._planted.append(namespace)
            self.sites += [Site(name, module.__name__, first, last) for name, first, last in planting.sites]

    def _site(self, name: str, problems: List[str]) -> List[str]:
        if not problems or name in self._out():
            return [] if problems else problems
        self._note((name,))
        return problems

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The planted checks in the table, in its order, for the block."""
        planted: Dict[str, Any] = {}
        for namespace in self._planted:
            planted.update(namespace[self.rows])
        with mock.patch.dict(self.table, {k: planted[k] for k in self.table if k in planted}):
            yield


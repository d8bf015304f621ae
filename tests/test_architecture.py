"""Every import in the package points down a floor or stays on its own, and none goes round in a circle.

Strategy: the import graph is read from the source with :mod:`ast` (every ``import`` and
``from ... import``, those inside functions and under ``if TYPE_CHECKING:`` included,
and ``importlib.import_module`` with a literal name), never by importing it. The floor
of each module comes from the one table in ``docs/architecture.md``. The judging
functions take the graph and the table as plain data, so a small made-up graph shows
that they name what they must.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
import tempfile
import unittest
from collections import deque
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "conformance"

#: Import circles still to be taken apart, each as the modules it goes through (a name
#: covers that module or package and everything in it, as in the floor table); the
#: imports inside one are let through. This must be empty: a circle is removed by moving
#: the type both sides need a floor down, and then its line goes. An entry that no
#: circle matches any longer fails the test, so the list cannot outlive its circles.
KNOWN_CYCLES: Tuple[FrozenSet[str], ...] = ()

#: The most lines a module of the package may have.
MAX_LINES = 800

#: module -> the modules it imports, each with the line of its first import there.
Graph = Mapping[str, Mapping[str, int]]
#: A floor: its number and what it holds.
Floor = Tuple[int, str]


# -- reading the graph --------------------------------------------------------------------------


def modules_under(root: pathlib.Path, package: str) -> Dict[str, pathlib.Path]:
    """Every module of ``package`` (a folder under ``root``) by dotted name; a package is its ``__init__``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool, known: Mapping[str, object]) -> List[str]:
    """The project modules one ``import`` statement or ``import_module`` call names."""
    top = module.split(".")[0]

    def nearest(name: str) -> Optional[str]:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    names: List[Optional[str]] = []
    if isinstance(node, ast.Import):
        names = [nearest(a.name) for a in node.names if a.name.split(".")[0] == top]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source.split(".")[0] != top:
            return []
        # ``from package import module`` imports the module; ``from module import name``, the module.
        names = [
            f"{source}.{a.name}" if f"{source}.{a.name}" in known else nearest(source) for a in node.names
        ]
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        target = node.args[0].value
        if called == "import_module" and isinstance(target, str) and target.split(".")[0] == top:
            names = [nearest(target)]
    return [n for n in names if n is not None and n != module]


def import_graph(root: pathlib.Path, package: str = PACKAGE) -> Dict[str, Dict[str, int]]:
    """Each module of ``package`` and the project modules it imports, with the line of the first import."""
    known = modules_under(root, package)
    graph: Dict[str, Dict[str, int]] = {}
    for module, path in known.items():
        edges: Dict[str, int] = {}
        tree = ast.parse(path.read_text("utf-8"), str(path))
        for node in ast.walk(tree):
            for target in _imported(node, module, path.name == "__init__.py", known):
                line = getattr(node, "lineno", 0)
                edges[target] = min(line, edges.get(target, line))
        graph[module] = edges
    return graph


def floor_table(text: str, package: str = PACKAGE) -> Dict[str, Floor]:
    """The table of ``docs/architecture.md``: each entry (``name`` or ``name.*``, in full) to its floor."""
    start = text.index("## The floors")
    end = text.find("\n## ", start + 1)
    table: Dict[str, Floor] = {}
    for number, what, modules in re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|$", text[start:end], re.M):
        for name in re.findall(r"`([^`]+)`", modules):
            full = package if name == "__init__" else f"{package}.{name}"
            if full in table:
                raise ValueError(f"docs/architecture.md places {name} twice")
            table[full] = (int(number), what.strip())
    return table


# -- judging it ---------------------------------------------------------------------------------


def covers(entry: str, module: str) -> bool:
    """Whether a table entry or known-cycle name (``a.b``, ``a.b.*``) stands for ``module``."""
    if entry.endswith(".*"):
        entry = entry[:-2]
    return module == entry or module.startswith(entry + ".")


def floor_of(module: str, table: Mapping[str, Floor]) -> Optional[Floor]:
    """``module``'s floor: the most specific entry of ``table`` that covers it; an exact name covers
    only that module."""
    fitting = [e for e in table if (covers(e, module) if e.endswith(".*") else e == module)]
    return table[max(fitting, key=len)] if fitting else None


def circles(graph: Graph) -> List[List[str]]:
    """The strongly connected parts of ``graph`` with more than one module (Tarjan's), sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, {})):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == module:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def one_cycle(graph: Graph, part: Iterable[str]) -> List[str]:
    """A shortest circle through the first module of ``part``, as the modules in import order, closed."""
    members = sorted(part)
    start = members[0]
    came_from: Dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for target in sorted(graph.get(module, {})):
            if target not in members:
                continue
            if target == start:
                path = [module]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target not in came_from:
                came_from[target] = module
                queue.append(target)
    raise AssertionError(f"no circle through {start} in {members}")


def _known(part: List[str], known: Iterable[FrozenSet[str]]) -> Optional[FrozenSet[str]]:
    """The known circle that is exactly ``part``: each of its names covers a module of it, and back."""
    for names in known:
        if all(any(covers(n, m) for n in names) for m in part) and all(
            any(covers(n, m) for m in part) for n in names
        ):
            return names
    return None


def circle_problems(graph: Graph, known: Iterable[FrozenSet[str]] = ()) -> List[str]:
    """Each import circle not known, named by one of its circles; each known circle that is gone."""
    known = list(known)
    problems, matched = [], set()
    for part in circles(graph):
        names = _known(part, known)
        if names is not None:
            matched.add(names)
            continue
        path = one_cycle(graph, part)
        steps = " -> ".join(path)
        problems.append(
            f"import circle: {steps} ({len(part)} modules in all: {', '.join(part)}); move what both sides "
            "need a floor down"
        )
    for names in known:
        if names not in matched:
            problems.append(
                f"the known circle through {', '.join(sorted(names))} is gone or changed: remove it from "
                "KNOWN_CYCLES (or list it as it now is)"
            )
    return problems


def floor_problems(
    graph: Graph, table: Mapping[str, Floor], known: Iterable[FrozenSet[str]] = ()
) -> List[str]:
    """Each module the table does not place, each entry that places no module, and each import up a
    floor, but those inside a known circle."""
    problems = []
    for module in sorted(graph):
        if floor_of(module, table) is None:
            problems.append(f"{module} has no floor: add it to the table in docs/architecture.md")
    for entry in sorted(table):
        if not any(covers(entry, m) if entry.endswith(".*") else entry == m for m in graph):
            problems.append(f"docs/architecture.md places {entry}, which is no module: take it out")
    tolerated = [set(part) for part in circles(graph) if _known(part, list(known)) is not None]
    for module in sorted(graph):
        mine = floor_of(module, table)
        for target, line in sorted(graph[module].items()):
            theirs = floor_of(target, table)
            if mine is None or theirs is None or theirs[0] <= mine[0]:
                continue
            if any(module in part and target in part for part in tolerated):
                continue
            problems.append(
                f"{module} (floor {mine[0]}, {mine[1]}) imports {target} (floor {theirs[0]}, {theirs[1]}) "
                f"on line {line}: imports point down; move what it needs to floor {mine[0]} or below"
            )
    return problems


def long_modules(modules: Mapping[str, pathlib.Path], limit: int = MAX_LINES) -> List[str]:
    """Each module longer than ``limit`` lines, with its length and what to do."""
    problems = []
    for module, path in sorted(modules.items()):
        lines = len(path.read_text("utf-8").splitlines())
        if lines > limit:
            problems.append(
                f"{module} ({path.name}) has {lines} lines, over {limit}: split it by concept into "
                "modules of a package and place each in docs/architecture.md"
            )
    return problems


# -- the tests ----------------------------------------------------------------------------------


@functools.cache
def project() -> Tuple[Dict[str, Dict[str, int]], Dict[str, Floor]]:
    """The package's import graph and the floor table, read once for the tests that judge them."""
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    return import_graph(ROOT), floor_table(page)


class ArchitectureTests(unittest.TestCase):
    def test_no_import_goes_round_in_a_circle(self) -> None:
        """The package's import graph has no circle but those listed as known, and each of those is there."""
        graph, _ = project()
        problems = circle_problems(graph, KNOWN_CYCLES)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_every_module_has_a_floor_and_imports_only_down_or_level(self) -> None:
        """The table places every module, and no import goes from a lower floor to a higher one."""
        graph, table = project()
        problems = floor_problems(graph, table, KNOWN_CYCLES)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_no_module_is_over_800_lines(self) -> None:
        """Every module of the package, the command line's included, has at most 800 lines."""
        problems = long_modules(modules_under(ROOT, PACKAGE))
        self.assertEqual(problems, [], "\n".join(problems))

    def test_the_command_line_has_its_own_floor(self) -> None:
        """The command line's package sits on the top floor, and ``__main__`` only calls it."""
        graph, table = project()
        self.assertEqual(floor_of("conformance._cli.serve", table), (7, "the command line"))
        called = sorted(graph["conformance.__main__"])
        self.assertTrue(called and all(covers("conformance._cli", m) for m in called), called)

    def test_the_floors_run_from_one_up_without_a_gap(self) -> None:
        """The table's floors are numbered 1 to 7, bottom to top, each with its name."""
        _, table = project()
        floors = sorted(set(table.values()))
        self.assertEqual([n for n, _ in floors], list(range(1, 8)))
        self.assertEqual(floors[0][1], "contract and scenarios")
        self.assertEqual(floors[-1][1], "the command line")


class JudgingTests(unittest.TestCase):
    FLOORS: Dict[str, Floor] = {
        "p": (2, "front"),
        "p.low": (1, "bottom"),
        "p.high": (2, "top"),
        "p.a": (1, "bottom"),
        "p.b": (1, "bottom"),
    }

    def test_a_circle_and_an_upward_import_are_both_named(self) -> None:
        """In a made-up graph, the circle a -> b -> a and the import from floor 1 up to floor 2 are named."""
        graph = {"p": {}, "p.a": {"p.b": 3}, "p.b": {"p.a": 5}, "p.low": {"p.high": 7}, "p.high": {}}
        circle = circle_problems(graph)
        self.assertEqual(len(circle), 1, circle)
        self.assertIn("import circle: p.a -> p.b -> p.a (2 modules in all: p.a, p.b)", circle[0])
        self.assertEqual(
            floor_problems(graph, self.FLOORS),
            [
                "p.low (floor 1, bottom) imports p.high (floor 2, top) on line 7: imports point down; "
                "move what it needs to floor 1 or below"
            ],
        )

    def test_a_longer_circle_is_named_in_import_order(self) -> None:
        """A circle through three modules is named from its first module round to it again."""
        graph = {"p.c": {"p.a": 1}, "p.a": {"p.b": 1, "p.x": 1}, "p.b": {"p.c": 1}, "p.x": {}}
        (circle,) = circle_problems(graph)
        self.assertIn("import circle: p.a -> p.b -> p.c -> p.a (3 modules", circle)

    def test_a_module_without_a_floor_and_a_floor_entry_without_a_module_are_named(self) -> None:
        """A module the table leaves out, and a table entry no module answers, are each named."""
        graph: Dict[str, Dict[str, int]] = {"p": {}, "p.a": {}, "p.b": {}, "p.low": {}, "p.new": {}}
        self.assertEqual(
            floor_problems(graph, self.FLOORS),
            [
                "p.new has no floor: add it to the table in docs/architecture.md",
                "docs/architecture.md places p.high, which is no module: take it out",
            ],
        )

    def test_a_known_circle_is_let_through_and_a_gone_one_is_named(self) -> None:
        """A circle listed as known passes, with the upward import inside it; one no longer there fails."""
        graph = {"p": {}, "p.a": {}, "p.b": {}, "p.low": {"p.high": 7}, "p.high": {"p.low": 1}}
        known = [frozenset({"p.low", "p.high"})]
        self.assertEqual(circle_problems(graph, known), [])
        self.assertEqual(floor_problems(graph, self.FLOORS, known), [])
        self.assertEqual(len(floor_problems(graph, self.FLOORS)), 1)
        gone = circle_problems({"p.low": {}, "p.high": {"p.low": 1}}, known)
        self.assertEqual(len(gone), 1)
        self.assertIn("the known circle through p.high, p.low is gone", gone[0])

    def test_a_package_name_covers_its_modules_in_the_table_and_in_a_known_circle(self) -> None:
        """``p.fam.*`` places every module under p.fam, and ``p.fam`` in a known circle covers them all."""
        table = {"p.fam.*": (1, "bottom"), "p.fam.own": (2, "top"), "p.top": (2, "top")}
        self.assertEqual(floor_of("p.fam", table), (1, "bottom"))
        self.assertEqual(floor_of("p.fam.x", table), (1, "bottom"))
        self.assertEqual(floor_of("p.fam.own", table), (2, "top"))
        self.assertIsNone(floor_of("p.top.x", table))
        graph = {"p.fam": {"p.fam.x": 1}, "p.fam.x": {"p.top": 2}, "p.top": {"p.fam": 3}}
        known = [frozenset({"p.fam", "p.top"})]
        self.assertEqual(circle_problems(graph, known), [])
        self.assertEqual(len(circle_problems(graph, [frozenset({"p.fam.x", "p.top"})])), 2)
        placed = {"p.fam.*": (1, "bottom"), "p.top": (2, "top")}
        self.assertEqual(floor_problems(graph, placed, known), [])
        self.assertEqual(len(floor_problems(graph, placed)), 1)

    def test_a_module_over_the_limit_is_named(self) -> None:
        """A made-up module one line over the limit is named with its length; one at the limit is not."""
        with tempfile.TemporaryDirectory() as folder:
            root = pathlib.Path(folder)
            (root / "p").mkdir()
            (root / "p" / "__init__.py").write_text("", "utf-8")
            (root / "p" / "long.py").write_text("x = 1\n" * 11, "utf-8")
            (root / "p" / "short.py").write_text("x = 1\n" * 10, "utf-8")
            problems = long_modules(modules_under(root, "p"), limit=10)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("p.long (long.py) has 11 lines, over 10: split it by concept", problems[0])

    def test_the_graph_reads_every_kind_of_import(self) -> None:
        """Plain, relative, lazy, type-only and import_module imports are read; others' modules are not."""
        sources = {
            "p/__init__.py": "from .a import thing\n",
            "p/a.py": (
                "from __future__ import annotations\n"
                "import json\n"
                "from typing import TYPE_CHECKING\n"
                "from . import b\n"
                "if TYPE_CHECKING:\n"
                "    from .sub.c import C\n"
                "thing = 1\n"
            ),
            "p/b.py": "def f():\n    from .sub import d\n    import p.sub.c\n",
            "p/sub/__init__.py": "from .. import a\n",
            "p/sub/c.py": "import importlib\nm = importlib.import_module('p.b')\nfrom ..a import thing\n",
            "p/sub/d.py": "from p import b as bee\nimport os.path\n",
        }
        with tempfile.TemporaryDirectory() as folder:
            root = pathlib.Path(folder)
            for name, text in sources.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text, "utf-8")
            graph = import_graph(root, "p")
        self.assertEqual(
            {m: sorted(edges) for m, edges in graph.items()},
            {
                "p": ["p.a"],
                "p.a": ["p.b", "p.sub.c"],
                "p.b": ["p.sub.c", "p.sub.d"],
                "p.sub": ["p.a"],
                "p.sub.c": ["p.a", "p.b"],
                "p.sub.d": ["p.b"],
            },
        )
        self.assertEqual(graph["p.a"]["p.sub.c"], 6)


if __name__ == "__main__":
    unittest.main()

"""The conformance table's data: verdicts, their classification, the page, the comparison.

Strategy: the runner hands this module plain rows (one per target: the library, its
version, the wire, and each case's verdict with the check ids behind a failure), and
everything after that is pure: every failure is matched against the classifications
kept beside the adapters, the page is rendered from the rows, and a fresh run is
compared with the committed one verdict by verdict. Nothing here imports a library
under test, so the tests feed it made-up rows without any of them installed.

A failure is one (case, check) pair. A case that raised something other than the
contract's ``AssertionError`` (an adapter or library crash) counts as a failure of the
pseudo-check ``error:<ExceptionType>``, which needs a classification like any other.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

__all__ = [
    "CLASSES",
    "Classification",
    "Failure",
    "changed_verdicts",
    "classify",
    "failures_of",
    "load_classifications",
    "matches_pattern",
    "problems_in",
    "kit_bugs_fixed",
    "render_page",
]

#: What a failure can be, and the field each class must name.
CLASSES: Mapping[str, str] = {
    # The library does what no provider's API allows: its code is cited.
    "library-bug": "where",
    # The library chooses, and documents, a behaviour the contract does not take; the
    # target could declare it through the knob named.
    "design-choice": "knob",
    # The kit failed a library that did what the provider's API allows: a kit bug,
    # listed as open at the top of the page until it is fixed.
    "kit-bug": "evidence",
}
#: How much a library bug costs its users: ``harmful`` where it runs a tool on unfinished or
#: invented arguments, drops or invents data, or retries what will not come back;
#: ``contract`` where it gets a status, a key or an error class wrong.
SEVERITIES = ("harmful", "contract")
#: Where each library bug's ready-to-file report lives: ``ecosystem/reports/<id>.md``.
REPORTS = Path(__file__).resolve().parent / "reports"
RESULTS_SCHEMA = 1
#: ``  - [variant] text [check-id]``: a problem line of a case's failure message.
_PROBLEM = re.compile(
    r"^\s+- (?:\[(?P<variant>[^\]]+)\] )?(?P<text>.*) \[(?P<check>[a-z0-9][a-z0-9:._-]*)\]$"
)


@dataclass(frozen=True)
class Failure:
    """One check that failed in one case of one target."""

    adapter: str
    library: str
    target: str
    case: str
    check: str
    reason: str
    #: The variant (the provider's shape) the check first failed on; ``""`` where the case
    #: plays one shape only.
    variant: str = ""


def matches_pattern(value: str, pattern: str) -> bool:
    """Whether ``value`` matches ``pattern``: ``fnmatch`` patterns, alternatives split by ``|``.

    One finding often shows under two check ids (a loop that asks again both sends too
    many requests and says it stopped at the budget), so one entry names both.
    """
    return any(fnmatch.fnmatchcase(value, part) for part in pattern.split("|"))


@dataclass(frozen=True)
class Classification:
    """What a set of failures is, matched by library, target, case, check and variant
    (``fnmatch`` patterns, alternatives split by ``|``)."""

    id: str
    library: str
    case: str
    check: str
    kind: str
    summary: str
    target: str = "*"
    where: str = ""
    upstream: str = ""
    knob: str = ""
    evidence: str = ""
    #: The case fails only some of the time (a race in the library): its verdict is
    #: left out of the comparison with the committed table, and the page says so.
    flaky: bool = False
    #: A library bug's weight, one of :data:`SEVERITIES`.
    severity: str = ""
    #: Where it shows: the stream shape, mode, flags or Python version it needs.
    conditions: str = ""
    #: The file of the library's code line, as installed (``litellm/main.py``), and the
    #: text quoted from it; a test opens the installed file and finds the text.
    code_file: str = ""
    code_text: str = ""
    #: Where the provider's shape or rule the verdict rests on is shown: a capture, or the
    #: provider's docs (a library bug always names it; so does any entry whose failures came
    #: on a variant, a shape the provider sends, which a test checks against the results).
    source: str = ""
    #: The variants, by name, the failure must have failed on first: where a case plays
    #: several of the provider's shapes and the finding is one shape's (a spend cap's 429,
    #: not a spend limit's). ``*``, the default, is any, and a case of one shape.
    variant: str = "*"

    def matches(self, failure: Failure) -> bool:
        return (
            failure.library == self.library
            and matches_pattern(failure.target, self.target)
            and matches_pattern(failure.case, self.case)
            and matches_pattern(failure.check, self.check)
            and matches_pattern(failure.variant, self.variant)
        )


def load_classifications(path: Path) -> List[Classification]:
    """The classifications in ``path``, each checked for its class's required field."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    found: List[Classification] = []
    for number, entry in enumerate(raw.get("classifications", [])):
        try:
            item = Classification(**entry)
        except TypeError as error:
            raise ValueError(f"{path.name}: classification #{number}: {error}") from None
        if item.kind not in CLASSES:
            raise ValueError(
                f"{path.name}: {item.id}: kind must be one of {', '.join(CLASSES)}, got {item.kind!r}"
            )
        if not getattr(item, CLASSES[item.kind]).strip():
            raise ValueError(f"{path.name}: {item.id}: a {item.kind} must name its {CLASSES[item.kind]}")
        if item.kind == "library-bug":
            _check_bug(path, item)
        found.append(item)
    ids = [c.id for c in found]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"{path.name}: classification ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}"
        )
    return found


def _check_bug(path: Path, item: Classification) -> None:
    """A library bug is keyed to its own cases and checks, and says how much it costs and where."""
    for name in ("case", "check"):
        if any(mark in getattr(item, name) for mark in "*?["):
            raise ValueError(
                f"{path.name}: {item.id}: a library bug names its {name}s one by one (a|b), never a "
                f"wildcard, so that no new, unrelated failure is filed under it; got {getattr(item, name)!r}"
            )
    if item.severity not in SEVERITIES:
        raise ValueError(
            f"{path.name}: {item.id}: severity must be one of {SEVERITIES}, got {item.severity!r}"
        )
    if not (item.code_file and item.code_text):
        raise ValueError(f"{path.name}: {item.id}: a library bug quotes its code line (code_file, code_text)")
    if not item.source.strip():
        raise ValueError(
            f"{path.name}: {item.id}: a library bug names the capture or provider doc that shows what the "
            "provider sends and what it means (source)"
        )


def kit_bugs_fixed(path: Path) -> List[Dict[str, str]]:
    """The kit bugs the table found in the kit and that were fixed, as kept beside the classifications."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return list(raw.get("kit_bugs_fixed", []))


def problems_in(message: str) -> List[Tuple[str, str]]:
    """Each (check id, one-line reason) in a case's failure message, in order, once each."""
    return [(check, reason) for check, reason, _ in shaped_problems_in(message)]


def shaped_problems_in(message: str) -> List[Tuple[str, str, str]]:
    """Each (check id, one-line reason, the variant it failed on or ``""``) in a case's failure
    message, in order, once each (the first line of a check names its variant)."""
    seen: Dict[str, Tuple[str, str]] = {}
    for line in message.splitlines():
        match = _PROBLEM.match(line)
        if match and match.group("check") not in seen:
            reason = match.group("text").strip()
            shown = reason if len(reason) <= 240 else reason[:237] + "..."
            seen[match.group("check")] = (shown, match.group("variant") or "")
    return [(check, reason, variant) for check, (reason, variant) in seen.items()]


def failures_of(rows: Iterable[Mapping[str, Any]]) -> List[Failure]:
    """Every failure in ``rows``, in row and case order."""
    return [
        Failure(
            row["adapter"],
            row["library"],
            row["target"],
            item["case"],
            item["check"],
            item["reason"],
            item.get("variant", ""),
        )
        for row in rows
        for item in row["failures"]
    ]


def classify(
    failures: Sequence[Failure], classifications: Sequence[Classification]
) -> Tuple[Dict[Failure, Classification], List[Failure], List[Classification]]:
    """Each failure's classification (the first that matches), the unclassified, the unused."""
    found: Dict[Failure, Classification] = {}
    unclassified: List[Failure] = []
    for failure in failures:
        match = next((c for c in classifications if c.matches(failure)), None)
        if match is None:
            unclassified.append(failure)
        else:
            found[failure] = match
    used = {c.id for c in found.values()}
    return found, unclassified, [c for c in classifications if c.id not in used]


def _weight(bug: Classification) -> int:
    """Where a bug sorts: harmful first (a severity not given sorts last)."""
    return SEVERITIES.index(bug.severity) if bug.severity in SEVERITIES else len(SEVERITIES)


def _verdicts(results: Mapping[str, Any]) -> Dict[Tuple[str, str, str], str]:
    """``(adapter, target, case)`` to its verdict: the outcome, with a failure's check ids."""
    verdicts: Dict[Tuple[str, str, str], str] = {}
    for row in results.get("rows", []):
        checks: Dict[str, List[str]] = {}
        for item in row["failures"]:
            checks.setdefault(item["case"], []).append(item["check"])
        for case, outcome in row["cases"].items():
            shown = (
                outcome
                if outcome not in ("fail", "error")
                else f"{outcome} {' '.join(sorted(checks.get(case, [])))}"
            )
            verdicts[(row["adapter"], row["target"], case)] = shown
    return verdicts


def changed_verdicts(
    committed: Mapping[str, Any], fresh: Mapping[str, Any], classifications: Sequence[Classification] = ()
) -> List[str]:
    """One line per verdict of ``fresh`` that differs from ``committed``, for the targets both ran.

    A case a ``flaky`` classification names is not compared: it passes or fails by a race.
    """
    before, after = _verdicts(committed), _verdicts(fresh)
    ran = {(a, t) for a, t, _ in after}
    libraries = {(row["adapter"], row["target"]): row["library"] for row in fresh.get("rows", [])}
    flaky = [c for c in classifications if c.flaky]
    lines: List[str] = []
    for key in sorted(set(before) | set(after)):
        if (key[0], key[1]) not in ran:
            continue  # a target this run did not run (--only) is not compared
        library = libraries.get((key[0], key[1]), "")
        if any(
            c.library == library
            and matches_pattern(key[1], c.target)
            and matches_pattern(key[2], c.case)
            for c in flaky
        ):
            continue
        old, new = before.get(key, "absent"), after.get(key, "absent")
        if old != new:
            lines.append(f"{key[1]} {key[2]}: committed {old!r}, now {new!r}")
    return lines


# -- the page ------------------------------------------------------------------------

_MARK = {"pass": "✓", "fail": "✗", "error": "E", "skip": "–"}


def _columns(rows: Sequence[Mapping[str, Any]]) -> List[str]:
    """The scenario or stage names of ``rows``' cases, in first-seen order."""
    names: List[str] = []
    for row in rows:
        for case in row["cases"]:
            name = case.rsplit("/", 1)[0]
            if name not in names:
                names.append(name)
    return names


def _cell(row: Mapping[str, Any], name: str) -> str:
    marks = [
        f"{_MARK[row['cases'][f'{name}/{mode}']]}"
        for mode in ("chat", "stream")
        if f"{name}/{mode}" in row["cases"]
    ]
    return "".join(marks) or " "


def _matrix(rows: Sequence[Mapping[str, Any]], word: str) -> List[str]:
    names = _columns(rows)
    lines = [
        f"| library | version | target | wire | {' | '.join(names)} |",
        "|" + "---|" * (4 + len(names)),
    ]
    for row in rows:
        cells = " | ".join(_cell(row, name) for name in names)
        lines.append(f"| {row['library']} | {row['version']} | {row['target']} | {row['wire']} | {cells} |")
    retried = [f"{row['target']} `{case}`" for row in rows for case in row.get("retried", ())]
    lines.append("")
    if retried:
        shown = ", ".join(retried)
        lines.append(
            "Failed once and passed when run again (a timing bound missed under load, or a race or "
            f"a random wait in the library): {shown}."
        )
        lines.append("")
    lines.append(
        f"Each cell is the {word}'s chat then stream verdict (one mark where it runs in one mode): "
        "✓ pass, ✗ fail, E error (the case raised where it should have answered), – skip."
    )
    return lines


def _failure_lines(rows: Sequence[Mapping[str, Any]], found: Mapping[Failure, Classification]) -> List[str]:
    lines: List[str] = []
    for row in rows:
        mine = [f for f in failures_of([row])]
        if not mine:
            continue
        lines.append(f"**{row['target']}** ({row['library']} {row['version']}, {row['wire']}):")
        lines.append("")
        for failure in mine:
            label = found.get(failure)
            tag = f"{label.kind} `{label.id}`" if label else "**unclassified**"
            if label is not None and label.flaky:
                tag += " (intermittent)"
            lines.append(f"- `{failure.case}` `[{failure.check}]` {failure.reason} — {tag}")
        lines.append("")
    return lines


def latest_lines(pinned: Mapping[str, Any], latest: Optional[Mapping[str, Any]]) -> List[str]:
    """The page's section on the newest releases: each library's pinned and newest version, and
    each verdict that differs between the two runs, named with the release it was seen in."""
    lines = ["## The newest releases", ""]
    if latest is None:
        return lines + [
            "Not run yet: `python3 dev.py ecosystem --latest` runs the same adapters against each",
            "library's newest release (in `.venv-ecosystem-latest`, installed without the lock) and",
            "writes `ecosystem/results-latest.json`, which this section reads.",
            "",
        ]
    versions: Dict[str, Tuple[str, str]] = {}
    for row in pinned.get("rows", []):
        versions.setdefault(row["library"], (row["version"], "—"))
    for row in latest.get("rows", []):
        old = versions.get(row["library"], ("—", "—"))[0]
        versions[row["library"]] = (old, row["version"])
    before, after = _verdicts(pinned), _verdicts(latest)
    library_of = {(r["adapter"], r["target"]): r["library"] for r in latest.get("rows", [])}
    changed: List[str] = []
    for key in sorted(set(before) & set(after)):
        if before[key] != after[key]:
            library = library_of[(key[0], key[1])]
            pin, new = versions[library]
            changed.append(
                f"- *{key[1]}* `{key[2]}`: {before[key]} at the pin ({library} {pin}), "
                f"{after[key]} in {library} {new}"
            )
    new_cases = sorted(set(after) - set(before))
    lines += [
        f"Run {latest.get('generated', '?')} against the releases a fresh install of the table's libraries",
        "resolves to without the lock: each library's newest that fits the others' requirements, which",
        "can be older than the pin where another library caps it. A verdict that differs from the pinned",
        "run's names the release it was seen in (the change came in that release or one between it and",
        "the pin).",
        "",
        "| library | pinned | without the lock | verdicts changed |",
        "|---|---|---|---|",
    ]
    for library, (pin, new) in sorted(versions.items()):
        count = sum(1 for line in changed if f"({library} {pin})" in line)
        lines.append(f"| {library} | {pin} | {new} | {count if new != '—' else '—'} |")
    lines.append("")
    lines += changed or ["No verdict changed."]
    if new_cases:
        lines += ["", f"{len(new_cases)} cases ran only against the newest releases (new targets or cases)."]
    return lines + [""]


def render_page(
    results: Mapping[str, Any],
    classifications: Sequence[Classification],
    kit_fixed: Sequence[Mapping[str, str]] = (),
    latest: Optional[Mapping[str, Any]] = None,
) -> str:
    """``docs/ecosystem.md``: how to reproduce it, the versions, the bugs found, the matrices, and
    (from ``latest``, a run against the newest releases) what changed since the pins."""
    rows = results["rows"]
    found, unclassified, _ = classify(failures_of(rows), classifications)
    versions: Dict[str, str] = {}
    for row in rows:
        versions.setdefault(row["library"], row["version"])
    used = [c for c in classifications if c in found.values()]
    lines = [
        "# The conformance table",
        "",
        "Popular LLM clients and agent frameworks, each held by a small adapter to the backend suite",
        "(the library as the user's backend) or to the migration gate (the library's own agent loop,",
        "its tools run through the gate's toolset), on every wire it speaks, against the fake",
        "provider. Each failure is classified: a library bug (with the library's code), a design",
        "choice the library documents (with the knob that declares it), or a kit bug.",
        *(
            [
                "",
                f"**{len(unclassified)} failures of this run are not classified yet** (listed under",
                "[Unclassified](#unclassified)): the command exits non-zero until each has its",
                "classification, so they cannot drift into the table unexplained.",
            ]
            if unclassified
            else []
        ),
        "",
        *_library_lines(rows, found),
        *ADAPTER_RULES,
        *_transport_lines(),
        "## Reproduce it",
        "",
        "```",
        "python3 dev.py ecosystem            # every adapter; writes ecosystem/results.json and this page",
        "python3 dev.py ecosystem --check    # the same; fail on a verdict the committed table does not show",
        "python3 dev.py ecosystem --only openai_sdk --only anthropic_sdk   # some adapters",
        "python3 dev.py ecosystem --latest   # the same adapters on each library's newest release",
        "python3 dev.py ecosystem --only anthropic_sdk --explain stream-cut/stream   # one case, raw",
        "```",
        "",
        "The command builds `.venv-ecosystem` with the versions pinned in `ecosystem/requirements.txt`;",
        "the adapters are `ecosystem/adapters/*.py`, the classifications `ecosystem/classifications.json`.",
        "It exits non-zero on an unclassified failure, and with `--check` on a changed verdict;",
        "`--page-only` renders this page again from the committed results after a classification changes.",
        "Two runs in a row give the same verdicts (`python3 dev.py ecosystem && python3 dev.py ecosystem",
        "--check` exits 0): a failing case is run once more before it is believed, and a library's own",
        "race is marked intermittent and left out of the comparison. A run that adds failures prints each",
        "as `UNCLASSIFIED <target> <case> [<check>]`; each gets an entry in the classifications, keyed by",
        "library, target, case and check, and by the variant where the finding is one of the provider's",
        "shapes a case plays (`fnmatch` patterns, `|` between alternatives).",
        "",
        "Each adapter uses its library as its documentation shows, with the library's own retries",
        "turned off through its own knob, so that every answer surfaces as it came. The official SDKs",
        "that retry by default (openai, anthropic, cohere, boto3) have a second row, `(default retries)`,",
        "built as it ships: there the kit's faults relent as a provider's would (a 429 twice, a 503 or a",
        "cut once) and the retry layer is judged (its waits, its bound, what it never sends again), on",
        "the scenarios a retry changes; the rest are the first row's. Where a library",
        "needs a setting to speak to a provider it does not know by name (a model name it reads",
        "capabilities from, a streaming override), the adapter sets it and says so. A skip gives its",
        "reason: the wire has no such case, or the adapter does not reach that part of the library yet.",
        "",
        f"Generated {results['generated']} with Python {results['python']}, kit {results['kit']}"
        + (f" at commit {results['commit']}" if results.get("commit") else "")
        + f", in {results['seconds']:.0f} s on a 2-core machine ({results['jobs']} adapters at once"
        + (f", load average {results['load']} when it began" if results.get("load") else "")
        + ").",
        "",
        "| library | version |",
        "|---|---|",
        *(f"| {name} | {version} |" for name, version in sorted(versions.items())),
        "",
    ]
    bugs = sorted((c for c in used if c.kind == "library-bug"), key=lambda c: (_weight(c), c.library))
    lines += ["## Library bugs found", ""]
    if not bugs:
        lines += ["None in this run.", ""]
    for bug in bugs:
        lines.append(f"- **{bug.library}** (`{bug.id}`, {bug.severity}): {bug.summary}")
        if bug.conditions:
            lines.append(f"  When: {bug.conditions}.")
        if bug.variant != "*":
            lines.append(f"  On the provider's shapes: {_variants(bug)}.")
        report = REPORTS / f"{bug.id}.md"
        filed = f" Upstream: {bug.upstream}." if bug.upstream else ""
        if report.exists():
            filed += f" Report to file: [ecosystem/reports/{bug.id}.md](../ecosystem/reports/{bug.id}.md)."
        lines.append(f"  Code: {bug.where}.{filed}")
        lines.append(f"  The provider's side: {bug.source}.")
        seen = next(f for f, c in found.items() if c is bug)
        lines.append(
            f"  Reproduce: `python3 dev.py ecosystem --only {seen.adapter}`, case `{seen.case}` of "
            f"*{seen.target}*, which fails with: {seen.reason} `[{seen.check}]`"
        )
    lines.append("")
    lines += [
        "## Kit bugs the table found",
        "",
        f"The table has found {len(kit_fixed)} bugs in the kit itself since this list was started:",
        "failures that were the kit's, not the libraries'. Each was fixed in the kit, with a test,",
        "in the change that found it.",
        "",
        *(f"- `{k['id']}`: {k['summary']}" for k in kit_fixed),
        "",
    ]
    kit = [c for c in used if c.kind == "kit-bug"]
    if kit:
        lines += ["## Kit bugs open", ""]
        lines += ["These failures are the kit's, not the libraries': each is to be fixed in the kit.", ""]
        lines += [f"- `{c.id}` ({c.library}): {c.summary} Evidence: {c.evidence}." for c in kit]
        lines.append("")
    choices = [c for c in used if c.kind == "design-choice"]
    if choices:
        lines += ["## Documented design choices", ""]
        lines += [
            f"- **{c.library}** (`{c.id}`): {c.summary} Knob: {c.knob}."
            + (f" On the provider's shapes: {_variants(c)}." if c.variant != "*" else "")
            + (f" The provider's side: {c.source}." if c.source else "")
            for c in choices
        ]
        lines.append("")
    if unclassified:
        lines += ["## Unclassified", "", f"{len(unclassified)} failures have no classification yet.", ""]
    lines += latest_lines(results, latest)
    for kind, word, title in (("backend", "scenario", "Backends"), ("loop", "stage", "Agent loops")):
        mine = [row for row in rows if row["kind"] == kind]
        if not mine:
            continue
        lines += [f"## {title}", "", *_matrix(mine, word), "", "### Failures", ""]
        lines += _failure_lines(mine, found) or ["None.", ""]
    return "\n".join(lines).rstrip() + "\n"


#: The rules every adapter follows, the same for every library, as the page states them.
ADAPTER_RULES = [
    "## One rule for every row",
    "",
    "- **What the library hands its user goes to the kit unrepaired.** A provider's own SDK",
    "  (openai, anthropic, google-genai, boto3, cohere, ollama) hands over the provider's stop",
    "  reason and blocks as sent; its adapter is then the user's backend over it and does what the",
    "  contract asks of one: it maps the stop reason, calls a turn with calls a tool turn, and drops",
    "  the call a length turn cut off. A library that promises normalized output (LiteLLM's and",
    "  any-llm's OpenAI-shaped finish reasons and calls) is read as it came. LangChain has no",
    "  normalized finish reason (the provider's own is in `response_metadata`): its adapter maps",
    "  that and calls a turn with calls a tool turn, and hands its calls on as LangChain gave them",
    "  (`tool_calls`, and `invalid_tool_calls` as unparsed calls, apart on a length turn as",
    "  LangChain keeps them).",
    "- **A stream that ends short of its terminal event is never made a finished turn.** Over a",
    "  provider's SDK the adapter raises the contract's retryable error there, with no status",
    "  (the openai SDK stops at `[DONE]` and at the end of the body alike, so a clean end after",
    "  the finish reason is that SDK's design); a normalizing library's stream, and LangChain's,",
    "  go on as they ended, with no finish reason where the provider sent none.",
    "- **Errors.** What a failure means is the provider's business: from what the library's",
    "  exception exposes (its status, headers and body), the kit reads the kind as the reference",
    "  backend for that wire reads it. A library fails on an error only where its exception lost",
    "  what a careful user needs, or names a class the library documents as meaning something else.",
    "- **Transports.** One rule, in the shared adapter code (`LIBRARY_TRANSPORTS` in",
    "  `ecosystem/adapters/_kit.py`), the table below: a library that documents a class of its own",
    "  for a connection that failed or a body cut short is held to it, and its transport's error",
    "  reaching the user raw is filed against it (its user, who catches what the docs name, misses",
    "  it); a library that documents none hands its transport's errors on as its interface, and",
    "  those are read, as a documented class is, as the contract's retryable `server_error`. Only",
    "  the exception the library raised counts, not one it was raised while handling. A library",
    "  that hands on its provider SDK's errors (any-llm with its provider exceptions, a LangChain",
    "  integration that wraps none) is judged by that SDK's rule.",
    "- **Requests ask as a user would.** Where a shape comes only to a request that asks (thinking,",
    "  fine-grained tool streaming on Claude), the adapter asks through the library's own setting",
    "  where it has one; where it has none, the case skips that shape and says why.",
    "- **Modes.** Each row runs the library in the mode it recommends, and a setting the adapter",
    "  needs is named in the adapter. any-llm recommends `ANY_LLM_UNIFIED_EXCEPTIONS` (its",
    "  deprecation warning says the unified exceptions become the default): its rows named",
    "  *(unified exceptions)* run with it set, read as every row's exception is (the provider's",
    "  answer as the SDK under it kept it, in `original_exception`, else what the class states);",
    "  its rows named *(provider exceptions)* run with it unset, only on the scenarios where an",
    "  exception is raised, since elsewhere the mode changes nothing.",
    "",
]


def _transport_lines() -> List[str]:
    """The transport rule, library by library, from the shared adapter code's own table."""
    from .adapters._kit import LIBRARY_TRANSPORTS, TRANSPORTS

    lines = [
        "| library | its transports | its own class for a connection failure | a raw transport error is "
        "| where it says so |",
        "|---|---|---|---|---|",
    ]
    for library, rule in sorted(LIBRARY_TRANSPORTS.items()):
        modules = ", ".join(m for t in rule.transports for m in TRANSPORTS[t][:1])
        own = ", ".join(f"`{m}.{n}`" for m, n in sorted(rule.own)) or "none"
        verdict = "filed: a leak" if rule.own else "read as `server_error`"
        lines.append(f"| {library} | {modules} | {own} | {verdict} | {rule.source} |")
    return lines + [""]


def _variants(entry: Classification) -> str:
    """An entry's variants, as the page names them: ``tier-cap-429`` or ``a, b``."""
    return ", ".join(f"`{name}`" for name in entry.variant.split("|"))


def _library_lines(rows: Sequence[Mapping[str, Any]], found: Mapping[Failure, Classification]) -> List[str]:
    """One line per library: pass counts per suite, its harmful bugs first."""
    lines = [
        "## Verdicts by library",
        "",
        "| library | backend suite | agent-loop suite | bugs (harmful first) |",
        "|---|---|---|---|",
    ]
    libraries = sorted({row["library"] for row in rows})
    for library in libraries:
        counts = []
        for kind in ("backend", "loop"):
            mine = [
                v
                for row in rows
                if row["library"] == library and row["kind"] == kind
                for v in row["cases"].values()
            ]
            ran = [v for v in mine if v != "skip"]
            counts.append(f"{sum(v == 'pass' for v in ran)}/{len(ran)} pass" if ran else "—")
        bugs = {c.id: c for f, c in found.items() if f.library == library and c.kind == "library-bug"}
        ordered = sorted(bugs.values(), key=lambda c: (_weight(c), c.id))
        shown = ", ".join(f"`{c.id}` ({c.severity})" for c in ordered) or "none"
        lines.append(f"| {library} | {counts[0]} | {counts[1]} | {shown} |")
    return lines + [""]


def new_results(
    rows: Sequence[Mapping[str, Any]],
    *,
    generated: str,
    python: str,
    kit: str,
    seconds: float,
    jobs: int,
    commit: str = "",
    load: str = "",
) -> Dict[str, Any]:
    """The ``results.json`` document: the run's facts, then the rows in adapter and target order."""
    ordered = sorted(rows, key=lambda r: (r["kind"], r["adapter"], r["target"]))
    return {
        "schema": RESULTS_SCHEMA,
        "generated": generated,
        "python": python,
        "kit": kit,
        "seconds": round(seconds, 1),
        "jobs": jobs,
        **({"commit": commit} if commit else {}),
        **({"load": load} if load else {}),
        "rows": list(ordered),
    }


def read_results(path: Path) -> Optional[Dict[str, Any]]:
    """The committed results, or ``None`` where there are none yet."""
    if not path.exists():
        return None
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema") != RESULTS_SCHEMA:
        raise ValueError(f"{path.name}: schema {data.get('schema')!r}, this runner reads {RESULTS_SCHEMA}")
    return data

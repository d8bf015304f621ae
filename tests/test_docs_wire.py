"""What the docs say a provider sends, read from the wire that sends it.

The pages describe each provider's bytes (statuses, error types and codes, finish
reasons, retry delays and the headers that carry them); the wires are what the fake
provider actually sends. Three kinds of test hold them together. Each wire page's
"Scenario by scenario" table is read cell by cell: every ``key: "value"`` it quotes is
in that scenario's replies, every 4xx or 5xx status it names is one of theirs, and every
``retry-after: N`` or "no ``retry-after``" is what their headers carry; its variant
tables name the shapes the wire plays, with the kinds each accepts and the kind of its
source. Each troubleshooting section of a scenario quotes only values and statuses some
wire sends for it. The prose claims that name a provider (troubleshooting, the gate's
pages) are listed below, each with its words as the page writes them and the reading
of the wire that decides it; a page reworded so that the words are gone fails too, so a
claim cannot drift away from its test.
"""

from __future__ import annotations

import base64
import json
import re
import unittest
from functools import cache
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from conformance._checks._rule import rule_of
from conformance.fixture import conformance_request
from conformance.provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
from conformance.reference import REFERENCE_BACKENDS
from conformance.scenarios import SCENARIOS
from conformance.wires import WIRES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: The scenarios a wire plays from ``reply()`` alone, whose replies a plain request gets.
PLAYED = (
    "text",
    "tool-call",
    "tool-call-with-stop",
    "truncated-tool-call",
    "content-filter",
    "stream-error",
    "stream-cut",
    "rate-limit",
    "quota",
    "auth",
    "overloaded",
    "server-error",
    "context-overflow",
)
FAILURES = ("rate-limit", "quota", "auth", "overloaded", "server-error", "context-overflow")


@cache
def request_for(wire: str, mode: str) -> RecordedRequest:
    """The generation request the wire's reference backend sends in ``mode``."""
    backend = REFERENCE_BACKENDS[wire]("http://127.0.0.1:9", False)
    chat = conformance_request("conformance-model")
    stream = mode == "stream"
    url = urlsplit(backend.url(chat, stream))
    body = json.dumps(backend.body(chat, stream)).encode()
    headers = {k.lower(): v for k, v in backend.headers(stream).items()}
    return RecordedRequest("POST", url.path, url.query, headers, body, "HTTP/1.1")


@cache
def replies(wire: str, scenario: str, mode: str = "chat") -> Tuple[Tuple[str, Reply], ...]:
    """``(variant, reply)`` for each shape of ``scenario`` the wire answers ``mode``'s request in."""
    played = WIRES[wire]
    request = request_for(wire, mode)
    out = []
    for variant in played.variants(scenario, mode):
        reply = (
            played.reply(scenario, mode, request, variant.name)
            if variant.name
            else played.reply(scenario, mode, request)
        )
        if reply is not None:
            out.append((variant.name, reply))
    return tuple(out)


def reply(wire: str, scenario: str, variant: str = "", mode: str = "chat") -> Reply:
    """The one reply of ``variant`` (the first shape where unnamed); a test error if there is none."""
    found = dict(replies(wire, scenario, mode))
    if variant not in found and not variant:
        variant = next(iter(found), "")
    if variant not in found:
        raise AssertionError(f"{wire} has no {scenario}/{mode} shape {variant!r}: {sorted(found)}")
    return found[variant]


def sent(one: Reply) -> str:
    """Everything a reply's bytes say, as text: its body (a stream's chunks, with Bedrock
    InvokeModel's base64 event payloads decoded) and its headers as ``name: value`` lines."""
    parts = []
    if isinstance(one, JsonReply):
        parts.append(one.sent_body(one.encoded()).decode("utf-8", "replace"))
    elif isinstance(one, StreamReply):
        raw = b"".join(one.chunks)
        parts.append(raw.decode("utf-8", "replace"))
        parts += [
            base64.b64decode(m.group(1)).decode("utf-8", "replace")
            for m in re.finditer(rb'"bytes":"([A-Za-z0-9+/=]+)"', raw)
        ]
    parts += [f"{name.lower()}: {value}" for name, value in (getattr(one, "headers", None) or {}).items()]
    return "\n".join(parts)


def header(one: Reply, name: str) -> Optional[str]:
    return {k.lower(): v for k, v in (getattr(one, "headers", None) or {}).items()}.get(name)


def delay(wire: str, scenario: str, variant: str = "") -> Optional[float]:
    """The delay the shape's reply carries, as the wire reads it for a client."""
    return WIRES[wire].retry_after_sent(reply(wire, scenario, variant))


def status(wire: str, scenario: str, variant: str = "") -> Optional[int]:
    return getattr(reply(wire, scenario, variant), "status", None)


def says(wire: str, scenario: str, words: str, variant: str = "", mode: str = "chat") -> bool:
    """Whether the shape's bytes carry ``words`` (JSON written either compact or spaced)."""
    text = sent(reply(wire, scenario, variant, mode))
    return words in text or words.replace(": ", ":") in text


def delaying_wires() -> List[str]:
    """The wires with a rate-limit shape whose 429 asks for a delay, in any form."""
    return sorted(
        name for name in WIRES if any(WIRES[name].retry_after_sent(r) for _, r in replies(name, "rate-limit"))
    )


def undelayed_wires() -> List[str]:
    """The wires that answer a rate limit, and never with a delay."""
    return sorted(
        name
        for name in WIRES
        if replies(name, "rate-limit") and name not in delaying_wires()
    )


def words_of(page: str) -> str:
    """A page's text with its line breaks and runs of spaces made one space."""
    return " ".join((ROOT / page).read_text(encoding="utf-8").split())


def backticked_wires(page: str, after: str, until: str) -> List[str]:
    """The wire names written in backticks in a page between two phrases."""
    text = words_of(page)
    start = text.index(after)
    span = text[start : text.index(until, start)]
    return sorted(name for name in re.findall(r"`([a-z0-9-]+)`", span) if name in WIRES)


Check = Callable[[], bool]

#: The prose claims about a provider's bytes: (page, the words as written, what decides them).
CLAIMS: Sequence[Tuple[str, str, Check]] = (
    # troubleshooting.md#rate-limit
    (
        "docs/troubleshooting.md",
        'With one (Anthropic: `retry-after: 7`; Azure OpenAI Chat: `retry-after: 7`; Gemini: '
        '`RetryInfo.retryDelay: "7s"`)',
        lambda: header(reply("anthropic", "rate-limit"), "retry-after") == "7"
        and header(reply("azure-openai-chat", "rate-limit", "retry-after"), "retry-after") == "7"
        and says("gemini", "rate-limit", '"retryDelay": "7s"', "retry-info"),
    ),
    (
        "docs/troubleshooting.md",
        "api.openai.com's 429, whose delay is in its message only, Chat and Responses alike; "
        "Azure's `no-retry-after` and `reset-tokens`; Gemini's bare `no-details` 429; Vertex AI's "
        "`RESOURCE_EXHAUSTED`; every Bedrock throttle; Cohere's trial-key 429",
        lambda: all(
            delay(*shape) is None
            for shape in (
                ("openai-chat", "rate-limit"),
                ("openai-responses", "rate-limit"),
                ("azure-openai-chat", "rate-limit", "no-retry-after"),
                ("azure-openai-chat", "rate-limit", "reset-tokens"),
                ("gemini", "rate-limit", "no-details"),
                ("anthropic-vertex", "rate-limit"),
                ("gemini-vertex", "rate-limit"),
                ("bedrock-converse", "rate-limit"),
                ("bedrock-invoke", "rate-limit"),
                ("cohere", "rate-limit"),
            )
        )
        and says("anthropic-vertex", "rate-limit", "RESOURCE_EXHAUSTED")
        and says("gemini-vertex", "rate-limit", "RESOURCE_EXHAUSTED"),
    ),
    (
        "docs/troubleshooting.md",
        "no shipped wire sends it today",
        lambda: not any(
            header(r, "retry-after-ms") for name in WIRES for s in FAILURES for _, r in replies(name, s)
        ),
    ),
    (
        "docs/troubleshooting.md",
        "on a wire whose 429 names no delay (OpenAI's, Cohere's)",
        lambda: {"openai-chat", "cohere"} <= set(undelayed_wires()),
    ),
    (
        "docs/troubleshooting.md",
        "where only some variants name one (Azure's, Gemini's)",
        lambda: all(
            any(WIRES[name].retry_after_sent(r) for _, r in replies(name, "rate-limit"))
            and any(WIRES[name].retry_after_sent(r) is None for _, r in replies(name, "rate-limit"))
            for name in ("azure-openai-chat", "gemini")
        ),
    ),
    # troubleshooting.md#quota
    (
        "docs/troubleshooting.md",
        "OpenAI and Anthropic send this as a **429**, like a rate limit; only the body tells it apart "
        '(OpenAI `error.code: "insufficient_quota"`, Anthropic `details.error_code: '
        '"enforced_spend_limit_reached"`',
        lambda: status("openai-chat", "quota") == 429
        and says("openai-chat", "quota", '"code": "insufficient_quota"')
        and status("anthropic", "quota", "tier-cap-429") == 429
        and says("anthropic", "quota", '"error_code": "enforced_spend_limit_reached"', "tier-cap-429"),
    ),
    (
        "docs/troubleshooting.md",
        "Anthropic's most common is a **400** `invalid_request_error`",
        lambda: status("anthropic", "quota", "credit-balance-400") == 400
        and says("anthropic", "quota", '"type": "invalid_request_error"', "credit-balance-400"),
    ),
    (
        "docs/troubleshooting.md",
        "or a 402 `billing_error`",
        lambda: status("anthropic", "quota", "billing-402") == 402
        and says("anthropic", "quota", '"type": "billing_error"', "billing-402"),
    ),
    (
        "docs/troubleshooting.md",
        "Gemini's per-day quota names the time until the day resets in its `RetryInfo` (52758 s), "
        "and the subscription's 429 a `retry-after` of minutes",
        lambda: delay("gemini", "quota") == 52758
        and float(header(reply("anthropic", "quota", "subscription-spend-429"), "retry-after") or 0) >= 60,
    ),
    (
        "docs/troubleshooting.md",
        "OpenAI, Anthropic's other shapes, Bedrock and Ollama send none",
        lambda: all(
            WIRES[name].retry_after_sent(r) is None
            for name in ("openai-chat", "openai-responses", "bedrock-converse", "bedrock-invoke", "ollama")
            for _, r in replies(name, "quota")
        )
        and all(
            WIRES["anthropic"].retry_after_sent(r) is None
            for variant, r in replies("anthropic", "quota")
            if variant != "subscription-spend-429"
        ),
    ),
    # troubleshooting.md#auth
    (
        "docs/troubleshooting.md",
        "401 for OpenAI and Anthropic, 403 for Bedrock, and a **400** `INVALID_ARGUMENT` with "
        '`ErrorInfo.reason: "API_KEY_INVALID"` for Gemini',
        lambda: status("openai-chat", "auth") == 401
        and status("openai-responses", "auth") == 401
        and status("anthropic", "auth") == 401
        and status("bedrock-converse", "auth") == 403
        and status("bedrock-invoke", "auth") == 403
        and status("gemini", "auth") == 400
        and says("gemini", "auth", '"status": "INVALID_ARGUMENT"')
        and says("gemini", "auth", '"reason": "API_KEY_INVALID"'),
    ),
    # troubleshooting.md#overloaded
    (
        "docs/troubleshooting.md",
        "OpenAI 503, Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`, Bedrock "
        "`ServiceUnavailableException`",
        lambda: status("openai-chat", "overloaded") == 503
        and status("anthropic", "overloaded") == 529
        and says("anthropic", "overloaded", '"type": "overloaded_error"')
        and status("gemini", "overloaded") == 503
        and says("gemini", "overloaded", '"status": "UNAVAILABLE"')
        and says("bedrock-converse", "overloaded", "ServiceUnavailableException"),
    ),
    (
        "docs/troubleshooting.md",
        "OpenAI's overload, as the wire sends it, is a 503 `server_error` whose code is null",
        lambda: all(
            getattr(r, "status", None) == 503 and says("openai-chat", "overloaded", '"code": null', v)
            and says("openai-chat", "overloaded", '"type": "server_error"', v)
            for v, r in replies("openai-chat", "overloaded")
        ),
    ),
    (
        "docs/troubleshooting.md",
        "The Responses API's in-stream error typed `service_unavailable_error`, coded "
        "`server_is_overloaded` (`stream-error`, variant `service-unavailable`)",
        lambda: all(
            says("openai-responses", "stream-error", code, "service-unavailable", "stream")
            for code in ("service_unavailable_error", "server_is_overloaded")
        ),
    ),
    # troubleshooting.md#server-error
    (
        "docs/troubleshooting.md",
        "The provider fails with a 500 (Ollama, as a relay to its cloud, also with a 502 when it "
        "cannot reach ollama.com)",
        lambda: {
            (name, getattr(r, "status", None))
            for name in WIRES
            for _, r in replies(name, "server-error")
            if getattr(r, "status", None) != 500
        }
        == {("ollama", 502)},
    ),
    # troubleshooting.md#context-overflow
    (
        "docs/troubleshooting.md",
        'a 400 with its own code or message (OpenAI `code: "context_length_exceeded"`, Anthropic '
        '"prompt is too long", Gemini "exceeds the maximum number of tokens", Bedrock "Input is too long")',
        lambda: all(
            status(name, "context-overflow") == 400 for name in WIRES if replies(name, "context-overflow")
        )
        and says("openai-chat", "context-overflow", '"code": "context_length_exceeded"')
        and says("anthropic", "context-overflow", "prompt is too long")
        and says("gemini", "context-overflow", "exceeds the maximum number of tokens")
        and says("bedrock-converse", "context-overflow", "Input is too long"),
    ),
    # gate-stages.md: which wires' 429 asks for a delay
    (
        "docs/gate-stages.md",
        "No 429 seen from these providers asks for a delay in any form",
        lambda: backticked_wires(
            "docs/gate-stages.md", "No 429 seen from these providers", "Ollama has no rate-limit reply"
        )
        == undelayed_wires()
        and not replies("ollama", "rate-limit"),
    ),
    (
        "docs/gate-stages.md",
        "`retry-after` on Anthropic, Azure OpenAI Chat and Gemini (the other wires' 429s ask for no "
        "delay; Ollama has none)",
        lambda: delaying_wires() == ["anthropic", "azure-openai-chat", "gemini"],
    ),
    (
        "docs/gate-stages.md",
        "`retry-after: 0.2` (Anthropic, Azure OpenAI Chat)",
        lambda: header(reply("anthropic", "rate-limit"), "retry-after") is not None
        and header(reply("azure-openai-chat", "rate-limit", "retry-after"), "retry-after") is not None,
    ),
    # gate.md: the providers' finish reasons
    (
        "docs/gate.md",
        'OpenAI `stop`; Responses `status: "completed"`; Anthropic and Bedrock `end_turn`',
        lambda: says("openai-chat", "text", '"finish_reason": "stop"')
        and says("openai-responses", "text", '"status": "completed"')
        and says("anthropic", "text", '"stop_reason": "end_turn"')
        and says("bedrock-converse", "text", '"stopReason": "end_turn"'),
    ),
    (
        "docs/gate.md",
        "Gemini `STOP`; Ollama `done_reason: \"stop\"`",
        lambda: says("gemini", "text", '"finishReason": "STOP"')
        and says("ollama", "text", '"done_reason": "stop"'),
    ),
    (
        "docs/gate.md",
        "OpenAI `tool_calls`; Anthropic and Bedrock `tool_use`",
        lambda: says("openai-chat", "tool-call", '"finish_reason": "tool_calls"')
        and says("anthropic", "tool-call", '"stop_reason": "tool_use"')
        and says("bedrock-converse", "tool-call", '"stopReason": "tool_use"'),
    ),
    (
        "docs/gate.md",
        "OpenAI `length`; Anthropic and Bedrock `max_tokens`; Gemini `MAX_TOKENS`",
        lambda: says("openai-chat", "truncated-tool-call", '"finish_reason": "length"')
        and says("anthropic", "truncated-tool-call", '"stop_reason": "max_tokens"')
        and says("bedrock-converse", "truncated-tool-call", '"stopReason": "max_tokens"')
        and says("gemini", "truncated-tool-call", '"finishReason": "MAX_TOKENS"'),
    ),
    (
        "docs/gate.md",
        "OpenAI `content_filter`; Gemini `SAFETY`",
        lambda: says("openai-chat", "content-filter", '"finish_reason": "content_filter"')
        and any("SAFETY" in sent(r) for _, r in replies("gemini", "content-filter")),
    ),
)


def table_rows(page: Path) -> Dict[str, Tuple[Tuple[str, ...], List[str]]]:
    """A wire page's "Scenario by scenario" rows: each scenario named in a row's first cell ->
    (every scenario of that row, its cells after the first: whole, streamed)."""
    rows: Dict[str, Tuple[Tuple[str, ...], List[str]]] = {}
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("| scenario | whole"):
            inside = True
            continue
        if not inside:
            continue
        if not line.startswith("|"):
            break
        if line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        named = tuple(s for s in re.findall(r"`([a-z-]+)`", cells[0]) if s in PLAYED)
        for scenario in named:
            rows[scenario] = (named, cells[1:])
    return rows


#: A value the table quotes: `` `error.type: "requests"` ``, `` `finish_reason: "stop"` ``.
QUOTED = re.compile(r'`([A-Za-z_][\w.\[\]]*): "([^"`]*)"`')
#: A failure status the table names: 429, 529; not part of a longer number.
STATUS = re.compile(r"(?<![\d.,])([45]\d\d)(?!\d)")
#: A delay header the table says a reply carries: `` `retry-after: 7` ``.
DELAY_HEADER = re.compile(r"`(retry-after(?:-ms)?): (\d+)`")


def cell_problems(wire: str, scenarios: Sequence[str], mode: str, cell: str) -> List[str]:
    """What a table cell says of the replies that they do not carry."""
    shapes = [r for scenario in scenarios for _, r in replies(wire, scenario, mode)]
    if not shapes or cell.startswith("the same"):
        return []
    text = "\n".join(sent(r) for r in shapes)
    where = f"{wire} {'/'.join(scenarios)} {'whole' if mode == 'chat' else 'streamed'}"
    problems = [
        f"{where}: `{key}: \"{value}\"` is in no reply"
        for key, value in QUOTED.findall(cell)
        if f'"{value}"' not in text and f'\\"{value}\\"' not in text
    ]
    if mode == "chat" and set(scenarios) <= set(FAILURES):
        statuses = {getattr(r, "status", None) for r in shapes}
        problems += [
            f"{where}: status {number} is none of the replies' {sorted(s for s in statuses if s)}"
            for number in STATUS.findall(cell)
            if int(number) not in statuses
        ]
        for name, value in DELAY_HEADER.findall(cell):
            if not any(header(r, name) == value for r in shapes):
                problems.append(f"{where}: no reply carries `{name}: {value}`")
        if "no `retry-after`" in cell and all(header(r, "retry-after") for r in shapes):
            problems.append(f"{where}: every reply carries retry-after, where the page says none")
    return problems


class WirePageTests(unittest.TestCase):
    def test_every_wire_has_a_scenario_table(self) -> None:
        """Each shipped wire's page has its "Scenario by scenario" table, with the failures in it."""
        for name in WIRES:
            with self.subTest(wire=name):
                rows = table_rows(DOCS / "wires" / f"{name}.md")
                self.assertTrue(set(FAILURES) & set(rows), f"{name}: no scenario table found")

    def test_the_scenario_tables_say_what_the_wires_send(self) -> None:
        """Every quoted value, failure status and delay header in a wire page's table is in its replies."""
        problems = []
        for name in WIRES:
            for scenario, (named, cells) in sorted(table_rows(DOCS / "wires" / f"{name}.md").items()):
                if scenario != named[0]:
                    continue  # a row of several scenarios is read once, for all of them
                for mode, cell in zip(("chat", "stream"), cells):
                    problems += cell_problems(name, named, mode, cell)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_a_wrong_cell_is_found(self) -> None:
        """A cell naming a status, a value or a delay the replies do not carry is reported, each."""
        cell = '429, `error.type: "tokens_per_day"`, `retry-after: 7`, and a 503'
        problems = cell_problems("openai-chat", ("rate-limit",), "chat", cell)
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(any("503" in p for p in problems), problems)
        self.assertTrue(any("tokens_per_day" in p for p in problems), problems)
        self.assertTrue(any("retry-after: 7" in p for p in problems), problems)


#: Scenarios whose shapes are the kit's own scripts, the same on every wire, and are
#: described once on the troubleshooting page rather than in each wire's variant table:
#: the history sent back, the broken argument text, the latency's silences.
OWN_SHAPES = ("tool-result", "corrupt-arguments", "slow-first-token", "stall")


def variant_rows(page: Path) -> List[List[str]]:
    """The rows of a wire page's variant tables (``| scenario | variant | ...``), as cells."""
    rows, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("| scenario | variant |"):
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif not line.startswith("|"):
            inside = False
    return rows


def played_wire(name: str) -> object:
    """The wire a page's variant tables describe: OpenAI Chat's with every compatible server
    and reasoning_content on, since its page lists those shapes too."""
    if name != "openai-chat":
        return WIRES[name]
    from conformance.wires.openai_chat import OpenAIChatWire

    return OpenAIChatWire(reasoning_content=True, servers=OpenAIChatWire.SERVERS)


def variant_problems(name: str) -> List[str]:
    """What a wire page's variant tables say of its variants that the variants do not."""
    wire = played_wire(name)
    problems, listed = [], set()
    for cells in variant_rows(DOCS / "wires" / f"{name}.md"):
        key, variant = (re.findall(r"`([^`]+)`", cell)[0] for cell in cells[:2])
        scenario, _, only = key.partition("/")
        modes = [only] if only else list(SCENARIOS[scenario].modes)
        listed.update((scenario, mode, variant) for mode in modes)
        shapes = [v for mode in modes for v in wire.variants(scenario, mode)]  # type: ignore[attr-defined]
        found = [v for v in shapes if v.name == variant]
        if not found:
            problems.append(f"{name}: the page lists {key} [{variant}], which the wire does not play")
            continue
        shape = found[0]
        # The column says the shape's one rule, as the checks read it.
        wanted = rule_of(wire, scenario, shape).describe()  # type: ignore[arg-type]
        if cells[4] != wanted:
            problems.append(
                f"{name}: {key} [{variant}]: a correct backend {wanted!r}, the page says {cells[4]!r}"
            )
        if shape.source_kind and not cells[5].startswith(f"{shape.source_kind}:"):
            problems.append(
                f"{name}: {key} [{variant}] rests on {shape.source_kind}, the page says {cells[5][:40]!r}"
            )
    for scenario, row in SCENARIOS.items():
        for mode in row.modes:
            for shape in WIRES[name].variants(scenario, mode):
                if shape.name and (scenario, mode, shape.name) not in listed and scenario not in OWN_SHAPES:
                    problems.append(
                        f"{name}: {scenario}/{mode} [{shape.name}] is in no variant table of its page"
                    )
    return problems


class VariantTableTests(unittest.TestCase):
    def test_each_page_lists_its_wires_variants_with_their_kinds_and_sources(self) -> None:
        """Each row names a shape the wire plays, the kinds it accepts and its kind of source; each
        named shape of the wire has its row (but the kit's own scripts, OWN_SHAPES)."""
        problems = [p for name in WIRES for p in variant_problems(name)]
        self.assertEqual(problems, [], "\n".join(problems))


#: Numbers a troubleshooting section names that are no claim about a provider: statuses a
#: backend makes up, named as what it must not report.
NOT_CLAIMS = {("stream-cut", "599"), ("stream-cut", "502")}


def section_problems(text: Optional[str] = None) -> List[str]:
    """What each troubleshooting section of a played scenario quotes (``key: "value"``, a 4xx or
    5xx status) that no wire sends for that scenario, the compatible servers' shapes included.
    The example messages (fenced blocks) are left out: they quote broken backends."""
    if text is None:
        text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    servers = played_wire("openai-chat")
    problems = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        scenario = section.split("\n", 1)[0].strip()
        if scenario not in PLAYED:
            continue
        prose = re.sub(r"```.*?```", "", section, flags=re.S)
        # A failure's section compares it with the others (Mistral's 429 beside its 401).
        related = FAILURES if scenario in FAILURES else (scenario,)
        shapes = [
            r
            for name in WIRES
            for one in related
            for mode in ("chat", "stream")
            for _, r in replies(name, one, mode)
        ]
        for one in related:
            for mode in ("chat", "stream"):
                request = request_for("openai-chat", mode)
                for variant in servers.variants(one, mode):  # type: ignore[attr-defined]
                    shape = servers.reply(one, mode, request, variant.name)  # type: ignore[attr-defined]
                    if shape is not None:
                        shapes.append(shape)
        said = "\n".join(sent(r) for r in shapes)
        statuses = {getattr(r, "status", None) for r in shapes}
        problems += [
            f"troubleshooting.md#{scenario}: `{key}: \"{value}\"` is in no wire's reply"
            for key, value in QUOTED.findall(prose)
            if f'"{value}"' not in said and f'\\"{value}\\"' not in said
        ]
        problems += [
            f"troubleshooting.md#{scenario}: status {number} is no wire's for it"
            for number in STATUS.findall(prose)
            if int(number) not in statuses and (scenario, number) not in NOT_CLAIMS
        ]
    return problems


class TroubleshootingTests(unittest.TestCase):
    def test_each_scenario_section_quotes_what_some_wire_sends(self) -> None:
        """Every quoted value and failure status of a scenario's section is in some wire's reply to it."""
        problems = section_problems()
        self.assertEqual(problems, [], "\n".join(problems))

    def test_a_wrong_section_is_found(self) -> None:
        """A section quoting a value or a status no wire sends for its scenario is reported, each."""
        text = (
            '## rate-limit\n\nA 418 with `error.type: "teapot"`; '
            'OpenAI `error.code: "rate_limit_exceeded"`.\n'
        )
        problems = section_problems(text)
        self.assertEqual(len(problems), 2, problems)
        self.assertTrue(any("418" in p for p in problems) and any("teapot" in p for p in problems))


class ProseClaimTests(unittest.TestCase):
    def test_each_claim_is_on_its_page_and_true_of_the_wire(self) -> None:
        """Each listed claim is written on its page as listed, and the wires' replies bear it out."""
        for page, words, check in CLAIMS:
            with self.subTest(page=page, claim=words[:60]):
                self.assertIn(" ".join(words.split()), words_of(page), "the page no longer says this")
                self.assertTrue(check(), f"{page}: the wire does not bear out: {words}")

    def test_the_claims_that_were_wrong_stay_gone(self) -> None:
        """No page says OpenAI's 429 carries a retry-after or retry-after-ms delay: it carries none."""
        self.assertIsNone(delay("openai-chat", "rate-limit"))
        for page in ("docs/troubleshooting.md", "README.md"):
            with self.subTest(page=page):
                self.assertNotIn("OpenAI: `retry-after: 7` and `retry-after-ms: 7000`", words_of(page))


if __name__ == "__main__":
    unittest.main()

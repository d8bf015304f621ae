"""Replay: a wire that answers from a folder of recorded fixtures, chunk for chunk.

Strategy: :class:`ReplayWire` is a :class:`~conformance.wires.Wire` whose replies
are recordings. It leans on the wire the fixtures were recorded with (``base``) for
everything a wire knows about its provider (which request is the generation call,
whether it asks for a stream, the request check), and adds three things a recording
can go wrong on, each reported where a user sees it:

* a request that matches no recording is answered with a 500 that says which
  recording came closest and how it differs, and the case fails on it (``request``
  check);
* a recording older than ``max_age`` still answers, but the case that used it fails
  (``request`` check) saying how old it is;
* a recording never used is reported by :meth:`ReplayWire.unused` and
  :meth:`ReplayWire.verify`, which a suite calls at teardown: only the whole run
  knows that nothing asked for it.

A request matches a recording when the method, the path and the parts of the body
that decide the answer are the same: :data:`MATCHED_FIELDS`, compared as canonical
JSON (key order and whitespace do not count), and the stream flag as the base wire
reads it. Everything else (sampling settings, metadata, headers, query) is ignored.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ProviderInputError
from ..provider.replies import JsonReply, RecordedRequest, Reply, StreamReply
from ..wires._base import Wire
from .fixture_format import Fixture, load_folder

if TYPE_CHECKING:
    from ..wires._turns import History, ScriptedTurn, TurnEvents

__all__ = ["MATCHED_FIELDS", "ReplayWire"]

#: The body fields that decide a provider's answer, in every wire's spelling:
#: model, conversation, system prompt, tools and tool choice, and the stream flag.
MATCHED_FIELDS = (
    "model", "messages", "input", "contents", "system", "instructions", "systemInstruction",
    "tools", "toolConfig", "tool_choice", "stream",
)
_STREAM_TYPES = frozenset(
    {"text/event-stream", "application/x-ndjson", "application/vnd.amazon.eventstream"}
)
#: How many answered requests keep their replay problems for the request check.
_REMEMBERED = 4096


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReplayWire(Wire):
    """A wire built from recorded fixtures: each answer is a recording, chunk for chunk.

    ``source`` is a folder of fixtures (or the :class:`Fixture` objects). ``base`` is
    the wire they were recorded with; by default the one their stamps name.
    ``max_age`` (seconds or a ``timedelta``) fails every case that uses an older
    recording. In the conformance suite a case uses the recordings stamped with its
    scenario; :meth:`answer` serves any request, whatever the scenario.
    """

    def __init__(
        self,
        source: Union[str, Sequence[Fixture]],
        base: Optional[Wire] = None,
        *,
        max_age: Union[float, _dt.timedelta, None] = None,
        now: Optional[_dt.datetime] = None,
    ) -> None:
        fixtures = load_folder(source) if isinstance(source, str) else list(source)
        if not fixtures:
            raise ProviderInputError(f"no fixtures to replay in {source!r}")
        wires = sorted({f.stamp.wire for f in fixtures})
        # The first file that names each wire: every error says where to look.
        files = {w: next(f.source or "a fixture" for f in fixtures if f.stamp.wire == w) for w in wires}
        if base is None:
            from ..wires import WIRES

            unknown = [w for w in wires if w not in WIRES]
            if unknown:
                raise ProviderInputError(
                    f"{files[unknown[0]]}: the stamp names the wire {unknown[0]!r}, which is not a shipped "
                    "wire; pass base= the wire it was recorded with"
                )
            if len(wires) != 1:
                named = "; ".join(f"{files[w]} names {w!r}" for w in wires)
                raise ProviderInputError(
                    f"the fixtures name {len(wires)} wires ({named}); replay one wire's fixtures at a time"
                )
            base = WIRES[wires[0]]
        elif wires != [base.name]:
            other = next(w for w in wires if w != base.name)
            raise ProviderInputError(
                f"{files[other]}: recorded with {other!r}, not {base.name!r} (base=); replay one wire's "
                "fixtures at a time"
            )
        self.base = base
        self.fixtures: Tuple[Fixture, ...] = tuple(fixtures)
        self.source = source if isinstance(source, str) else "fixtures"
        self.name = base.name
        self.provider = base.provider
        self.title = f"{base.title} (replayed)"
        self.tool_call_id = base.tool_call_id
        self.rate_limit_retry_after = base.rate_limit_retry_after
        self.texts = base.texts
        self.reports_usage = base.reports_usage
        self.optional_scenarios = base.optional_scenarios
        self.generation_path = base.generation_path
        self.sends_call_ids = base.sends_call_ids
        self.marks_tool_errors = base.marks_tool_errors
        self.tool_error_marker = base.tool_error_marker
        self.turn_reasoning = base.turn_reasoning
        self.call_reasoning = base.call_reasoning
        if isinstance(max_age, (int, float)):
            max_age = _dt.timedelta(seconds=max_age)
        self.max_age = max_age
        self._now = now or _dt.datetime.now(_dt.timezone.utc)
        self._lock = threading.Lock()
        self._uses = [0] * len(self.fixtures)
        self._misses: List[str] = []
        self._problems: Deque[Tuple[RecordedRequest, List[str]]] = deque(maxlen=_REMEMBERED)
        self._streams = [self._wants_stream(f) for f in self.fixtures]
        self._keys = [
            self._key_of(f.method, f.path, f.json, stream) for f, stream in zip(self.fixtures, self._streams)
        ]

    # -- what the base wire knows -------------------------------------------------

    def call_id(self, scenario: str) -> Optional[str]:
        return self.base.call_id(scenario)

    def usage_sent(self, scenario: str, request: RecordedRequest) -> bool:
        return self.base.usage_sent(scenario, request)

    def retry_after_for(self, scenario: str) -> Optional[float]:
        return self.base.retry_after_for(scenario)

    def retry_after_sent(self, reply: Reply) -> Optional[float]:
        return self.base.retry_after_sent(reply)

    def is_generation(self, request: RecordedRequest) -> bool:
        return self.base.is_generation(request)

    def wants_stream(self, request: RecordedRequest) -> bool:
        return self.base.wants_stream(request)

    # The agent-loop suite's scripted stages are the base wire's: a replayed target
    # gets them as well as one case per recorded conversation.

    def scripts_turns(self) -> bool:
        return self.base.scripts_turns()

    def turn_whole(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[Reply]:
        return self.base.turn_whole(turn, request)

    def turn_stream(self, turn: ScriptedTurn, request: RecordedRequest) -> Optional[TurnEvents]:
        return self.base.turn_stream(turn, request)

    def read_history(self, request: RecordedRequest) -> Optional[History]:
        return self.base.read_history(request)

    def history_error(self, problems: Sequence[str]) -> Reply:
        return self.base.history_error(problems)

    def conversations(self) -> Dict[Tuple[str, str], Tuple[Fixture, ...]]:
        """The recorded agent-loop conversations: by scenario and mode (``chat`` or
        ``stream``), their generation requests in recorded order.

        A fixture without a scenario belongs to none: only the stamp says which
        requests one conversation made.
        """
        out: Dict[Tuple[str, str], List[Fixture]] = {}
        for fixture, stream in zip(self.fixtures, self._streams):
            if fixture.stamp.scenario and self.base.is_generation(self._request_of(fixture)):
                mode = "stream" if stream else "chat"
                out.setdefault((fixture.stamp.scenario, mode), []).append(fixture)
        return {key: tuple(found) for key, found in out.items()}

    def aux_reply(self, request: RecordedRequest) -> Reply:
        found = self._match(request, None)
        return found[1] if found is not None else self.base.aux_reply(request)

    @property
    def scenarios(self) -> FrozenSet[str]:
        """The scenarios the fixtures are stamped with."""
        return frozenset(f.stamp.scenario for f in self.fixtures if f.stamp.scenario)

    def absent(self, scenario: str) -> Optional[str]:
        if scenario not in self.scenarios:
            return (
                f"no fixture in {self.source} is stamped with scenario {scenario!r} "
                f"(record one with --scenario {scenario})"
            )
        return None

    # -- answering ----------------------------------------------------------------

    def reply(
        self, scenario: str, mode: str, request: RecordedRequest, variant: str = ""
    ) -> Optional[Reply]:
        """The recording for ``request`` among those stamped with ``scenario``.

        A recording is one shape already: it has no variants, and ``variant`` is not read.
        """
        return self.answer(request, scenario)

    def answer(self, request: RecordedRequest, scenario: Optional[str] = None) -> Reply:
        """The recording that matches ``request`` (and ``scenario`` where given), or a 500 saying why none."""
        found = self._match(request, scenario)
        if found is not None:
            return found[1]
        problem = self._miss(request, scenario)
        with self._lock:
            self._misses.append(problem)
            self._problems.append((request, [problem]))
        return JsonReply(
            {"error": {"message": f"replay: {problem}", "type": "conformance_replay_miss"}}, status=500
        )

    def check_request(self, request: RecordedRequest, model: str) -> List[str]:
        """The base wire's request check, and what replaying this request ran into."""
        problems = list(self.base.check_request(request, model))
        with self._lock:
            for seen, found in self._problems:
                if seen is request:
                    problems.extend(found)
        return problems

    def _match(self, request: RecordedRequest, scenario: Optional[str]) -> Optional[Tuple[int, Reply]]:
        key = self._key_of(request.method, request.path, request.json, self.base.wants_stream(request))
        with self._lock:
            matches = [
                i for i, f in enumerate(self.fixtures)
                if self._keys[i] == key and (scenario is None or f.stamp.scenario == scenario)
            ]
            if not matches:
                return None
            # Recordings are used in the order they were made; once all are used the
            # last one answers again (the same case may run over HTTP/1.1 and h2c).
            index = next((i for i in matches if not self._uses[i]), matches[-1])
            self._uses[index] += 1
            stale = self._stale(self.fixtures[index])
            if stale:
                self._problems.append((request, [stale]))
        return index, self._reply_of(self.fixtures[index])

    @staticmethod
    def _reply_of(fixture: Fixture) -> Reply:
        headers = {k: v for k, v in fixture.response_headers.items() if k != "content-type"}
        content_type = fixture.content_type
        streamed = content_type.split(";")[0].strip().lower() in _STREAM_TYPES
        if fixture.chunked or streamed or not fixture.complete:
            return StreamReply(
                [data for _, _, data in fixture.chunks], content_type, fixture.status, headers,
                hang=not fixture.complete,
            )
        return JsonReply(fixture.body, fixture.status, headers, content_type)

    # -- matching -----------------------------------------------------------------

    @staticmethod
    def _request_of(fixture: Fixture) -> RecordedRequest:
        return RecordedRequest(fixture.method, fixture.path, fixture.query, dict(fixture.request_headers),
                               fixture.request_body, fixture.http_version)

    def _wants_stream(self, fixture: Fixture) -> bool:
        return bool(self.base.wants_stream(self._request_of(fixture)))

    @staticmethod
    def _key_of(method: str, path: str, body: Any, stream: bool) -> Tuple[str, ...]:
        fields = body if isinstance(body, dict) else {}
        return (method, path, str(stream), *(_canonical(fields.get(name)) for name in MATCHED_FIELDS))

    def _miss(self, request: RecordedRequest, scenario: Optional[str]) -> str:
        key = self._key_of(request.method, request.path, request.json, self.base.wants_stream(request))
        names = ("method", "path", "stream flag", *MATCHED_FIELDS)
        pool = [
            (i, f) for i, f in enumerate(self.fixtures) if scenario is None or f.stamp.scenario == scenario
        ]
        where = f" stamped {scenario!r}" if scenario is not None else ""
        if not pool:
            return f"no recording{where} to answer {request.method} {request.path}"
        scored = [
            ([n for n, a, b in zip(names, self._keys[i], key) if a != b], i, f) for i, f in pool
        ]
        differences, index, closest = min(scored, key=lambda item: len(item[0]))
        recorded = self._keys[index]
        details = "; ".join(
            f"{name}: recorded {_short(recorded[names.index(name)])}, got {_short(key[names.index(name)])}"
            for name in differences
        )
        return (
            f"{request.method} {request.path} matches no recording{where}; the closest, "
            f"{closest.source or index}, differs in {details}"
        )

    def _stale(self, fixture: Fixture) -> Optional[str]:
        if self.max_age is None:
            return None
        age = self._now - fixture.stamp.recorded()
        if age <= self.max_age:
            return None
        return (
            f"the recording {fixture.source or fixture.path} is {age.days} days old "
            f"(recorded {fixture.stamp.recorded_at}), older than max_age {self.max_age}; record it again"
        )

    # -- the end of a run ---------------------------------------------------------

    def unused(self) -> List[Fixture]:
        """The recordings nothing asked for, in recorded order."""
        with self._lock:
            return [f for f, uses in zip(self.fixtures, self._uses) if not uses]

    def problems(self, scenarios: Optional[Sequence[str]] = None) -> List[str]:
        """Every replay problem of the run: unused (in ``scenarios``, if given), stale, unmatched."""
        out = []
        for fixture in self.unused():
            if scenarios is None or fixture.stamp.scenario in scenarios:
                out.append(
                    f"the recording {fixture.source or fixture.path} ({fixture.method} {fixture.path}, "
                    f"scenario {fixture.stamp.scenario}) was never used: the backend no longer sends it"
                )
        for fixture in self.fixtures:
            stale = self._stale(fixture)
            if stale:
                out.append(stale)
        with self._lock:
            out.extend(self._misses)
        return out

    def verify(self, scenarios: Optional[Sequence[str]] = None) -> None:
        """Raise :class:`AssertionError` listing every replay problem; call it at teardown."""
        problems = self.problems(scenarios)
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            raise AssertionError(f"replay of {self.source}: {len(problems)} problem(s)\n{listed}")

    def usage(self) -> Mapping[str, int]:
        """How many times each recording answered, by its source."""
        with self._lock:
            return {f.source or str(i): n for i, (f, n) in enumerate(zip(self.fixtures, self._uses))}

"""What the SDK adapters share: silencing the warnings an SDK's own dependencies raise
about themselves. (Racing an SDK's await against the abort is the library's own
``conformance.race_abort``.)"""

from __future__ import annotations

import re
import threading
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from conformance.abort import shutdown_socket

#: Why the SDKs built on httpx skip abort and cancel over h2c: the verdict is right, and
#: known upstream.
HTTPX_H2_KEEPS_STREAM = (
    "httpx (httpcore 1.x) never resets an HTTP/2 stream it stops reading, on abort or on "
    "cancel (encode/httpcore#943, closed as won't fix): the provider's stream stays open, "
    "still generating, until the client is closed. Over h2c this SDK cannot meet abort or "
    "cancel; over HTTP/1.1 it closes the connection and passes"
)
#: The skips of an async SDK target over h2c.
HTTPX_H2_SKIPS = {"abort": HTTPX_H2_KEEPS_STREAM, "cancel": HTTPX_H2_KEEPS_STREAM}

#: The cases a retry layer changes; an SDK's default-retries suite runs these alone, and
#: its suites without retries run the rest.
RETRY_SCENARIOS = (
    "rate-limit",
    "overloaded",
    "server-error",
    "stream-cut",
    "quota",
    "auth",
    "context-overflow",
)


def retries_only(quota_reason: str) -> Dict[str, str]:
    """The skips of an SDK's default-retries suite: every case a retry layer does not change,
    and the quota case, which the SDK's own retries send again (``quota_reason`` says so, and
    the suite's own test holds it to that)."""
    from conformance.scenarios import SCENARIOS

    skip = {
        name: "run without retries by the suites above" for name in SCENARIOS if name not in RETRY_SCENARIOS
    }
    skip["quota"] = quota_reason
    return skip


#: (top-level package, class name) of the errors an SDK lets out, or wraps, when the
#: connection breaks mid-answer: a stream cut before its end event, a body cut short of
#: its Content-Length, an h2 stream reset.
_BROKEN_CONNECTION = frozenset(
    {
        ("httpx", "TransportError"),
        ("httpx2", "TransportError"),
        ("openai", "APIConnectionError"),
        ("anthropic", "APIConnectionError"),
        ("urllib3", "ProtocolError"),
        ("botocore", "ResponseStreamingError"),
        ("botocore", "HTTPClientError"),
    }
)


def broken_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is an SDK's error for a connection that broke, by its class or a base's.

    Matched by name, so that no SDK is imported to ask.
    """
    return any(
        (cls.__module__.split(".")[0], cls.__name__) in _BROKEN_CONNECTION for cls in type(exc).__mro__
    )


def cut_error(exc: BaseException, provider: str) -> Any:
    """The contract's error for a connection that broke: a retryable ``server_error``.

    Nothing in the bytes says more (no status, no error type), so a careful adapter
    calls it what a retry may well cure.
    """
    from conformance.contract import LLMError

    return LLMError.from_kind(
        "server_error",
        f"the connection broke before the answer was complete: {exc}",
        provider=provider,
        details={"transport": type(exc).__name__},
    )


def ended_short(provider: str, terminal: str) -> Any:
    """The contract's error for a stream whose body ended properly before ``terminal``: a
    retryable ``server_error``, as for a cut (a gateway ends its own response so when its
    upstream fails; only the missing terminal event tells)."""
    from conformance.contract import LLMError

    return LLMError.from_kind(
        "server_error",
        f"the stream ended before {terminal}",
        provider=provider,
        details={"terminal": terminal},
    )


def installed_version(distribution: str) -> Tuple[int, ...]:
    """The installed release of ``distribution`` as numbers, ``(2, 48, 0)``; ``()`` where it is absent.

    For a known break that only some releases of an SDK have: the declaration names the
    releases, whichever Python they are installed on.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version(distribution)
    except PackageNotFoundError:
        return ()
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


class ThirdPartyWarnings:
    """Ignore deprecation and end-of-life warnings raised from named third-party modules.

    The tests run with ``-W error`` so that a leaked socket or an un-awaited coroutine of
    ours fails; a warning an SDK's own code raises about its dependencies (google-genai
    1.47, the last release for Python 3.9, uses a pydantic validator form that pydantic
    2.12 deprecated; google-auth warns that Python 3.9 is past its end of life) says
    nothing about the wire and is not ours to fix. ``module`` is a regular expression
    matched against the module the warning is attributed to, so a warning raised from
    ``conformance`` or the tests still fails. Call :meth:`start` from the test module's
    ``setUpModule`` and :meth:`stop` from its ``tearDownModule``, so that no other test
    module runs under the filter.
    """

    def __init__(
        self,
        module: str,
        categories: Sequence[Type[Warning]] = (DeprecationWarning, PendingDeprecationWarning, FutureWarning),
    ) -> None:
        self.module = module
        self.categories = tuple(categories)
        self._saved: Optional[warnings.catch_warnings] = None

    def start(self) -> None:
        self._saved = warnings.catch_warnings()
        self._saved.__enter__()
        for category in self.categories:
            warnings.filterwarnings("ignore", category=category, module=self.module)

    def stop(self) -> None:
        if self._saved is not None:
            self._saved.__exit__(None, None, None)
            self._saved = None


def shared_between(tests: Any, classes: Sequence[str]) -> Any:
    """The module's tests, each case of ``classes`` run by one of them only, unless
    CONFORMANCE_LONG_TESTS=1 (CI), which runs every class whole.

    For the async adapter over HTTP/1.1 and over h2c: the same adapter code reads the
    same answers, so by default the cases are dealt out between the two in turn (in
    order of name), and every case still runs through the async adapter once, beside
    the sync adapter's full run. Called from a test module's ``load_tests``; a class
    named here that the module lacks is an error, so a rename cannot silently drop it.
    A class named on the command line runs whole (``load_tests`` is not consulted).
    """
    import unittest

    from ..test_provider_support import LONG_TESTS

    if LONG_TESTS:
        return tests
    flat = list(flatten(tests))
    found = {type(test).__name__ for test in flat}
    missing = [name for name in classes if name not in found]
    if missing:
        raise LookupError(f"shared_between names classes the module does not have: {', '.join(missing)}")
    methods = sorted({test._testMethodName for test in flat if type(test).__name__ in classes})
    owner = {method: classes[index % len(classes)] for index, method in enumerate(methods)}
    chosen = unittest.TestSuite()
    for test in flat:
        name = type(test).__name__
        if name not in classes or owner[test._testMethodName] == name:
            chosen.addTest(test)
    return chosen


def flatten(suite: Any) -> Iterator[Any]:
    """Every test in ``suite``, nested suites opened, in order."""
    import unittest

    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from flatten(test)
        else:
            yield test


class TracedSockets:
    """Remembers the sockets of the connections httpcore opens, to shut them down on abort.

    httpcore reports each new connection's network stream to the request's ``trace``
    extension; an httpx request hook puts the extension on every request.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.streams: List[Any] = []

    def on_request(self, request: Any) -> None:
        request.extensions["trace"] = self.trace

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            with self.lock:
                self.streams.append(info["return_value"])

    def shutdown(self, _reason: Optional[BaseException] = None) -> None:
        # shutdown() wakes a recv blocked in another thread and sends the FIN;
        # close() from here would do neither.
        with self.lock:
            streams = list(self.streams)
        for stream in streams:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                shutdown_socket(sock)

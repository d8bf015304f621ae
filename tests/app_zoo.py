"""Application functions for app mode's tests: a correct one, and one classic bug each.

Each is what an application's own code does with the standard library alone: it
reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment, as the official
SDK does, and asks OpenAI's Chat Completions for a streamed answer, retrying as its
author thought right. :data:`BROKEN` names, for each broken one, the script it is
run on and the only checks that must catch it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

#: What each function asks.
BODY = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "What is the weather?"}],
    "stream": True,
}


class Failed(Exception):
    """The provider answered with an error status, or the stream ended before ``[DONE]``."""

    def __init__(self, status: int, retry_after: Optional[float], retryable: bool) -> None:
        super().__init__(f"status {status}")
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


def _connection(timeout: Optional[float], azure: bool = False) -> Tuple[http.client.HTTPConnection, str]:
    """A connection to the provider the environment names, and the generation call's path."""
    if azure:
        base = urllib.parse.urlsplit(os.environ["AZURE_OPENAI_ENDPOINT"])
        version = os.environ["OPENAI_API_VERSION"]
        path = f"{base.path}/openai/deployments/{BODY['model']}/chat/completions?api-version={version}"
    else:
        base = urllib.parse.urlsplit(os.environ["OPENAI_BASE_URL"])
        path = f"{base.path}/chat/completions"
    return http.client.HTTPConnection(base.hostname or "", base.port, timeout=timeout), path


def _headers(azure: bool) -> Dict[str, str]:
    if azure:
        return {"api-key": os.environ["AZURE_OPENAI_API_KEY"], "content-type": "application/json"}
    return {"authorization": f"Bearer {os.environ['OPENAI_API_KEY']}", "content-type": "application/json"}


def _delay(headers: Any) -> Optional[float]:
    if headers.get("retry-after-ms"):
        return float(headers["retry-after-ms"]) / 1000
    if headers.get("retry-after"):
        return float(headers["retry-after"])
    return None


def ask(timeout: Optional[float] = 2.0, pieces: Optional[List[str]] = None, azure: bool = False) -> str:
    """One streamed answer's text; :class:`Failed` on an error status or a cut."""
    connection, path = _connection(timeout, azure)
    try:
        connection.request("POST", path, json.dumps(BODY), _headers(azure))
        response = connection.getresponse()
        if response.status >= 400:
            body = json.loads(response.read() or b"{}")
            kind = (body.get("error") or {}).get("type") or ""
            retryable = response.status in (429, 500, 502, 503, 529) and kind != "insufficient_quota"
            raise Failed(response.status, _delay(response.headers), retryable)
        text = [] if pieces is None else pieces
        for line in response:
            data = line.strip()
            if data == b"data: [DONE]":
                return "".join(text)
            if data.startswith(b"data: "):
                for choice in json.loads(data[6:]).get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
        raise Failed(200, None, True)
    except (OSError, ValueError, http.client.HTTPException) as error:
        # A cut: the connection ended, or ended inside an event.
        raise Failed(200, None, True) from error
    finally:
        connection.close()


def correct(azure: bool = False) -> str:
    """Retries what can come back, a bounded number of times, waiting what the provider asks."""
    backoff = 0.05
    for attempt in range(4):
        try:
            return ask(timeout=1.0, azure=azure)
        except Failed as failed:
            if not failed.retryable or attempt == 3:
                raise
            time.sleep(max(failed.retry_after or 0.0, backoff))
            backoff *= 2
    raise AssertionError("unreachable")


def ignores_retry_after() -> str:
    """Waits its own short backoff, whatever the provider asked for (Azure's 429 asks)."""
    for _ in range(4):
        try:
            return ask(azure=True)
        except Failed as failed:
            if not failed.retryable:
                raise
            time.sleep(0.03)
    raise RuntimeError("gave up")


def retries_at_once() -> str:
    """Asks again the moment a failure comes."""
    for _ in range(4):
        try:
            return ask()
        except Failed as failed:
            if not failed.retryable:
                raise
    raise RuntimeError("gave up")


def gives_up() -> str:
    """No retry at all: the first failure is the answer."""
    return ask()


def retries_a_quota_forever() -> str:
    """Loops on every 429 regardless, a quota's too, until its own deadline."""
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        try:
            return ask()
        except Failed as failed:
            if failed.status != 429:
                raise
            time.sleep(0.05)
    raise RuntimeError("gave up")


def repeats_the_cut_text() -> str:
    """Starts a cut stream again and hands on both attempts' text."""
    pieces: List[str] = []
    for _ in range(3):
        try:
            return ask(pieces=pieces)
        except Failed:
            time.sleep(0.05)
    raise RuntimeError("gave up")


def no_read_timeout() -> str:
    """Reads with no timeout: a stalled provider holds it for good."""
    return ask(timeout=None)


def impatient() -> str:
    """A read timeout shorter than the provider's time to first token, retried."""
    for _ in range(3):
        try:
            return ask(timeout=0.1)
        except Failed:
            time.sleep(0.05)
    raise RuntimeError("gave up")


def asks_twice() -> str:
    """Asks again after a good answer, hoping for a better one."""
    ask()
    return ask()


def never_asks() -> str:
    """Answers from a cache of its own: the provider never hears of it."""
    return "It is 18 °C and sunny in Paris."


async def correct_async() -> str:
    """The streamed answer read on a thread, its connection closed when the task is cancelled."""
    connection, path = _connection(5.0)
    done = _read_on_a_thread(connection, path, close=False)
    try:
        return await done
    finally:
        # Close the socket itself: it wakes the reading thread and tells the provider.
        sock = connection.sock
        if sock is not None:
            import socket

            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        connection.close()


async def keeps_reading_after_cancel() -> str:
    """Lets the cancellation through, but leaves its reading thread, and the connection, open."""
    connection, path = _connection(2.0)
    return await _read_on_a_thread(connection, path, close=True)


async def swallows_the_cancel() -> str:
    """Turns the cancellation into a normal end, with a fallback answer."""
    try:
        return await correct_async()
    except asyncio.CancelledError:
        return "fallback"


def _read_on_a_thread(connection: http.client.HTTPConnection, path: str, close: bool) -> asyncio.Future[str]:
    """Ask the question on ``connection`` from a thread of its own; the future, on the running
    loop, settles with the answer's text or the error. ``close``: the thread closes the
    connection when it is done (else the caller does, which is what wakes the thread)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            connection.request("POST", path, json.dumps(BODY), _headers(False))
            text = connection.getresponse().read().decode("utf-8", "replace")
            _hand_on(loop, done, text, None)
        except BaseException as error:  # noqa: BLE001 - handed to the task
            _hand_on(loop, done, None, error)
        finally:
            if close:
                connection.close()

    threading.Thread(target=read, daemon=True).start()
    return done


def _hand_on(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[str],
    value: Optional[str],
    error: Optional[BaseException],
) -> None:
    """Settle ``future`` on its loop; nothing where the task, and its loop, are gone."""
    try:
        loop.call_soon_threadsafe(_settle, future, value, error)
    except RuntimeError:  # the loop closed: the run is over
        pass


def _settle(future: asyncio.Future[str], value: Optional[str], error: Optional[BaseException]) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value or "")


@dataclass(frozen=True)
class Broken:
    """A broken application function, the script it is run on, and the only checks that catch it."""

    app: Callable[..., Any]
    what: str
    checks: Tuple[str, ...]
    options: Tuple[Tuple[str, Any], ...] = ()
    wire: str = "openai-chat"

    @property
    def script(self) -> Dict[str, Any]:
        return dict(self.options)


#: Each broken function, by name: the script it meets and the checks that must name it.
BROKEN: Dict[str, Broken] = {
    "ignores-retry-after": Broken(
        ignores_retry_after, "rate-limit", ("retry-wait",), wire="azure-openai-chat"
    ),
    "retries-at-once": Broken(retries_at_once, "overloaded", ("retry-backoff",)),
    "gives-up": Broken(gives_up, "server-error", ("retry-relent",)),
    "retries-a-quota-forever": Broken(retries_a_quota_forever, "quota", ("retry-permanent",)),
    "repeats-the-cut-text": Broken(repeats_the_cut_text, "cut", ("retry-no-repeat",)),
    "no-retry-after-cut": Broken(gives_up, "cut", ("retry-after-cut",)),
    # A stall's bound is the read timeout's, as in the suites: read-timeout names the
    # hang, and finished does not report it a second time.
    "no-read-timeout": Broken(no_read_timeout, "stall", ("read-timeout",), (("read_timeout", 0.5),)),
    "impatient": Broken(impatient, "slow-first-token", ("slow-first-token",), (("seconds", 0.6),)),
    "asks-twice": Broken(asks_twice, "text", ("no-retry",)),
    "never-asks": Broken(never_asks, "rate-limit", ("provider-reached",)),
    "keeps-reading-after-cancel": Broken(keeps_reading_after_cancel, "cancel", ("connection-closed",)),
    "swallows-the-cancel": Broken(swallows_the_cancel, "cancel", ("cancel-propagates",)),
}

#: The scripts the correct function must pass: the wire, what it plays, its options. On
#: Azure's route too for the rate limit, whose 429 asks for a delay (OpenAI's asks none).
PASSES: Tuple[Tuple[str, str, Tuple[Tuple[str, Any], ...]], ...] = (
    ("openai-chat", "text", ()),
    ("openai-chat", "rate-limit", ()),
    ("azure-openai-chat", "rate-limit", ()),
    ("openai-chat", "overloaded", ()),
    ("openai-chat", "server-error", ()),
    ("openai-chat", "quota", ()),
    ("openai-chat", "auth", ()),
    ("openai-chat", "cut", ()),
    ("openai-chat", "stall", (("read_timeout", 1.0),)),
    ("openai-chat", "slow-first-token", (("seconds", 0.3),)),
)

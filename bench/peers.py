"""The servers the bench sets side by side, each started in a daemon thread of the bench.

Strategy: every server answers the same two routes with the same bytes, so only the
server differs: ``POST /v1/json`` gets ``JSON_BODY`` (300 bytes, Content-Length) and
``POST /v1/sse`` gets ``EVENTS`` (20 events of 100 bytes, each written on its own).
Each one is wrapped in a :class:`Server` with ``start()`` (returns once it listens),
``stop()`` (returns once it is down) and ``port``, which is what a test that starts a
server of its own per test would use. A server whose package is missing is left out
with the reason, so the bench runs with whatever is installed.

The peers are what a user would reach for instead of the fake provider:
pytest-httpserver (werkzeug), aiohttp's ``AppRunner``, uvicorn (HTTP/1.1, the plain
``h11`` install) and hypercorn (h2c). The floors are the minimal ``asyncio``
servers of ``floors.py``: the least a server can do.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from floors import EVENTS, JSON_BODY, _FloorH2, _FloorHttp1, _FloorServer

from conformance.provider import JsonReply, StreamReply, start_fake_provider

__all__ = ["SERVERS", "Server", "available"]

#: How long a start or a stop may take before the bench gives up on that server.
_WAIT_SECONDS = 10.0


def _listening_socket() -> socket.socket:
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


class Server:
    """A server the bench can start, reach on ``port`` and stop."""

    name = ""
    h2c = False

    def __init__(self) -> None:
        self.port = 0

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class _LoopThread:
    """An event loop in a daemon thread, running ``serve(stopping, ready)`` until ``stop``."""

    def __init__(self, serve: Callable[[asyncio.Event, threading.Event], Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.failed: Optional[BaseException] = None
        self.stopping: Optional[asyncio.Event] = None
        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()
        if not self.ready.wait(_WAIT_SECONDS):
            raise RuntimeError("the server did not start in time")
        if self.failed is not None:
            raise self.failed

    def _run(self, serve: Callable[[asyncio.Event, threading.Event], Any]) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            self.stopping = asyncio.Event()
            try:
                await serve(self.stopping, self.ready)
            except BaseException as exc:
                self.failed = exc
                self.ready.set()
                raise

        try:
            self.loop.run_until_complete(main())
        except BaseException:  # noqa: BLE001 - reported through self.failed
            pass
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def stop(self) -> None:
        stopping = self.stopping
        if stopping is not None:
            self.loop.call_soon_threadsafe(stopping.set)
        self.thread.join(_WAIT_SECONDS)


# -- the library and the floors ---------------------------------------------------------


class Provider(Server):
    """The fake provider, scripted with a handler as a test would script it."""

    name = "provider"

    def __init__(self, http2: bool = False) -> None:
        super().__init__()
        self.http2 = http2
        self.h2c = http2
        self.provider: Any = None

    def start(self) -> None:
        json_reply, sse_reply = JsonReply(JSON_BODY), StreamReply(EVENTS)
        self.provider = start_fake_provider(http2=self.http2)
        self.provider.reply(lambda request: sse_reply if request.path == "/v1/sse" else json_reply)
        self.port = self.provider.port

    def stop(self) -> None:
        self.provider.close()


class Floor(Server):
    """A minimal ``asyncio.Protocol`` server: the least an HTTP server can do."""

    name = "floor"

    def __init__(self, http2: bool = False) -> None:
        super().__init__()
        self.h2c = http2
        self.server: Optional[_FloorServer] = None

    def start(self) -> None:
        self.server = _FloorServer(_FloorH2 if self.h2c else _FloorHttp1)
        self.port = self.server.port

    def stop(self) -> None:
        assert self.server is not None
        self.server.close()


# -- the peers ---------------------------------------------------------------------------


async def _asgi_app(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    """The two routes as a bare ASGI app, for uvicorn and hypercorn."""
    if scope["type"] != "http":
        return
    while True:  # read the whole body, as every server here does
        message = await receive()
        if not message.get("more_body"):
            break
    if scope["path"] == "/v1/sse":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for event in EVENTS:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    else:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(JSON_BODY)).encode())]})
        await send({"type": "http.response.body", "body": JSON_BODY})


class PytestHttpserver(Server):
    """pytest-httpserver with its defaults (werkzeug, not threaded), request log off."""

    name = "pytest-httpserver"

    def __init__(self) -> None:
        super().__init__()
        self.server: Any = None

    def start(self) -> None:
        from pytest_httpserver import HTTPServer
        from werkzeug import Response

        # Its per-request log line costs about 10% and fills the terminal; a user turns it off.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = HTTPServer(host="127.0.0.1", port=0)
        server.expect_request("/v1/json", method="POST").respond_with_data(
            JSON_BODY, content_type="application/json"
        )
        server.expect_request("/v1/sse", method="POST").respond_with_handler(
            lambda request: Response(iter(EVENTS), mimetype="text/event-stream")
        )
        server.start()
        self.server = server
        self.port = server.port

    def stop(self) -> None:
        self.server.stop()


class Aiohttp(Server):
    """aiohttp's ``web.AppRunner`` on a socket of ours, access log off."""

    name = "aiohttp"

    def __init__(self) -> None:
        super().__init__()
        self.thread: Optional[_LoopThread] = None

    def start(self) -> None:
        from aiohttp import web

        sock = _listening_socket()
        self.port = sock.getsockname()[1]

        async def json_route(request: Any) -> Any:
            await request.read()
            return web.Response(body=JSON_BODY, content_type="application/json")

        async def sse_route(request: Any) -> Any:
            await request.read()
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(request)
            for event in EVENTS:
                await response.write(event)
            await response.write_eof()
            return response

        async def serve(stopping: asyncio.Event, ready: threading.Event) -> None:
            app = web.Application()
            app.router.add_post("/v1/json", json_route)
            app.router.add_post("/v1/sse", sse_route)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.SockSite(runner, sock).start()
            ready.set()
            try:
                await stopping.wait()
            finally:
                await runner.cleanup()
                sock.close()

        self.thread = _LoopThread(serve)

    def stop(self) -> None:
        assert self.thread is not None
        self.thread.stop()


class Uvicorn(Server):
    """uvicorn with the pure-Python ``h11`` protocol and the asyncio loop (a plain install)."""

    name = "uvicorn"

    def __init__(self) -> None:
        super().__init__()
        self.server: Any = None
        self.thread: Optional[threading.Thread] = None

    def start(self) -> None:
        import uvicorn

        sock = _listening_socket()
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(_asgi_app, http="h11", loop="asyncio", log_level="warning",
                                lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        self.server = server

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            finally:
                sock.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + _WAIT_SECONDS
        while not server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.0005)
        if not server.started:
            raise RuntimeError("uvicorn did not start")

    def stop(self) -> None:
        assert self.thread is not None
        self.server.should_exit = True
        self.thread.join(_WAIT_SECONDS)


class Hypercorn(Server):
    """hypercorn serving h2c with prior knowledge; no readiness hook, so start polls the port."""

    name = "hypercorn"
    h2c = True

    def __init__(self) -> None:
        super().__init__()
        self.thread: Optional[_LoopThread] = None

    def start(self) -> None:
        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        probe = _listening_socket()  # a free port; hypercorn binds it itself
        self.port = probe.getsockname()[1]
        probe.close()
        config = Config()
        config.bind = [f"127.0.0.1:{self.port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("bench.hypercorn")
        config.errorlog.setLevel(logging.CRITICAL)
        config.keep_alive_max_requests = 1 << 30  # its default of 1000 closes busy connections

        async def serve(stopping: asyncio.Event, ready: threading.Event) -> None:
            ready.set()
            await hypercorn_serve(_asgi_app, config, shutdown_trigger=stopping.wait)  # type: ignore[arg-type]

        self.thread = _LoopThread(serve)
        deadline = time.monotonic() + _WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.0005)
        raise RuntimeError("hypercorn did not start")

    def stop(self) -> None:
        assert self.thread is not None
        self.thread.stop()


#: name, transport, factory, the package it needs.
SERVERS: List[Tuple[str, str, Callable[[], Server], Optional[str]]] = [
    ("floor", "http/1.1", Floor, None),
    ("provider", "http/1.1", Provider, None),
    ("pytest-httpserver", "http/1.1", PytestHttpserver, "pytest_httpserver"),
    ("aiohttp", "http/1.1", Aiohttp, "aiohttp"),
    ("uvicorn", "http/1.1", Uvicorn, "uvicorn"),
    ("floor", "h2c", lambda: Floor(http2=True), "h2"),
    ("provider", "h2c", lambda: Provider(http2=True), "h2"),
    ("hypercorn", "h2c", Hypercorn, "hypercorn"),
]


def available() -> Tuple[List[Tuple[str, str, Callable[[], Server]]], List[str]]:
    """The servers whose packages are installed, and a line for each one left out."""
    chosen, missing = [], []
    for name, transport, factory, package in SERVERS:
        if package is not None and importlib.util.find_spec(package) is None:
            missing.append(f"{name} ({transport}) left out: pip install {package.replace('_', '-')}")
        else:
            chosen.append((name, transport, factory))
    return chosen, missing

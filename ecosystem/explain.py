"""One case of one adapter, run with what the library itself handed over printed beside the verdict.

    python3 dev.py ecosystem --only ADAPTER --explain CASE [--target TEXT]

Strategy: a reviewer who re-checks a row wants the library's own exception (its
class, status, body, what it wraps) or its own output, not the adapter's reading of
it. The case runs in this process as the table runs it, against a backend (or loop)
wrapped in a witness that passes every call through and writes down, per call, what
came back or what was raised, with the whole chain of causes: an adapter raises its
contract error ``from`` the library's, so the library's is in the chain. Nothing the
case sees is changed: the witness returns and raises what the adapter did.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
import traceback
import unittest
from typing import Any, Callable, List, Optional, TextIO

__all__ = ["describe_exception", "explain", "Witness"]

#: The attributes a library's exception keeps its provider's answer in, read where present.
_FIELDS = (
    "status_code",
    "status",
    "code",
    "provider_status_code",
    "llm_provider",
    "error",
    "body",
    "message",
    "response_json",
    "details",
    "kind",
    "retryable",
    "retry_after",
)
_LIMIT = 600


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _LIMIT else text[: _LIMIT - 3] + "..."


def describe_exception(exc: BaseException) -> List[str]:
    """Each exception of ``exc``'s chain (causes, then contexts): its class, text and the fields it keeps."""
    lines: List[str] = []
    seen: List[int] = []
    current: Optional[BaseException] = exc
    depth = 0
    while current is not None and id(current) not in seen and depth < 8:
        seen.append(id(current))
        klass = type(current)
        how = "raised" if depth == 0 else ("from" if current is _link(exc, depth) else "while handling")
        lines.append(f"  {how} {klass.__module__}.{klass.__qualname__}: {_short(str(current))}")
        bases = [k for k in klass.__mro__[1:] if k not in (object, BaseException)]
        mro = [f"{k.__module__}.{k.__qualname__}" for k in bases]
        lines.append(f"    bases: {', '.join(mro[:6]) or '-'}")
        for name in _FIELDS:
            value = getattr(current, name, None)
            if value is not None and not callable(value):
                lines.append(f"    .{name} = {_short(value)}")
        response = getattr(current, "response", None)
        if response is not None and not callable(response):
            status = getattr(response, "status_code", getattr(response, "status", None))
            headers = getattr(response, "headers", None)
            lines.append(f"    .response: status {status!r}, headers {_short(dict(headers or {}))}")
        frame = traceback.extract_tb(current.__traceback__)[-1:] if current.__traceback__ else []
        for entry in frame:
            lines.append(f"    at {_site(entry.filename)}:{entry.lineno} ({entry.name})")
        current = current.__cause__ or current.__context__
        depth += 1
    return lines


def _link(exc: BaseException, depth: int) -> Optional[BaseException]:
    """The exception ``depth`` steps down ``exc``'s chain if that step was an explicit ``from``."""
    current: Optional[BaseException] = exc
    for _ in range(depth - 1):
        current = current.__cause__ or current.__context__ if current is not None else None
    return current.__cause__ if current is not None else None


def _site(filename: str) -> str:
    """A traceback's file as the installed package path (``anthropic/_streaming.py``)."""
    marker = "site-packages/"
    return filename.split(marker, 1)[1] if marker in filename else filename


class Witness:
    """A backend (or loop) passed through, each call's return or exception written to ``out``.

    Each method is async exactly where the wrapped one is, since the kit's driver runs a
    sync method in a thread of its own and an async one on its loop.
    """

    def __init__(self, inner: Any, out: TextIO, label: str = "") -> None:
        self._inner = inner
        self._out = out
        self._label = label
        self._calls = 0
        for name, sync, coroutine, generator in (
            ("chat", self._chat, self._achat, None),
            ("chat_stream", self._stream, self._astream_call, self._astream),
            ("run", self._run, self._arun, None),
        ):
            method = getattr(inner, name, None)
            if method is None:
                continue
            if inspect.isasyncgenfunction(method) and generator is not None:
                setattr(self, name, generator)
            elif inspect.iscoroutinefunction(method):
                setattr(self, name, coroutine)
            else:
                setattr(self, name, sync)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _note(self, what: str, lines: List[str]) -> None:
        print(f"{self._label}call {self._calls} {what}", file=self._out)
        for line in lines:
            print(line, file=self._out)

    def _raised(self, exc: BaseException) -> None:
        self._note("raised:", describe_exception(exc))

    def _returned(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            return self._awaited(value)
        if hasattr(value, "__aiter__"):
            return self._async_chunks(value)
        if hasattr(value, "__next__"):
            return self._sync_chunks(value)
        self._note("returned:", [f"  {_short(value)}"])
        return value

    def _called(self, method: Callable[..., Any], *args: Any) -> Any:
        self._calls += 1
        try:
            got = method(*args)
        except BaseException as exc:
            self._raised(exc)
            raise
        return self._returned(got)

    async def _awaited(self, got: Any) -> Any:
        try:
            value = await got
        except BaseException as exc:
            self._raised(exc)
            raise
        return self._returned(value)

    async def _async_chunks(self, stream: Any) -> Any:
        try:
            async for chunk in stream:
                print(f"  chunk {_short(chunk)}", file=self._out)
                yield chunk
        except BaseException as exc:
            self._raised(exc)
            raise
        self._note("ended normally", [])

    def _sync_chunks(self, stream: Any) -> Any:
        try:
            for chunk in stream:
                print(f"  chunk {_short(chunk)}", file=self._out)
                yield chunk
        except BaseException as exc:
            self._raised(exc)
            raise
        self._note("ended normally", [])

    def _chat(self, request: Any) -> Any:
        return self._called(self._inner.chat, request)

    async def _achat(self, request: Any) -> Any:
        return await self._called(self._inner.chat, request)

    def _stream(self, request: Any) -> Any:
        return self._called(self._inner.chat_stream, request)

    async def _astream_call(self, request: Any) -> Any:
        return await self._called(self._inner.chat_stream, request)

    async def _astream(self, request: Any) -> Any:
        async for chunk in self._called(self._inner.chat_stream, request):
            yield chunk

    def _run(self, *args: Any) -> Any:
        return self._called(self._inner.run, *args)

    async def _arun(self, *args: Any) -> Any:
        return await self._called(self._inner.run, *args)

    def hooked(self, hook: Callable[..., Any]) -> Callable[..., Any]:
        """A target's ``run(loop, task)`` hook, witnessed, async where ``hook`` is."""
        if inspect.iscoroutinefunction(hook):

            async def arun(loop: Any, task: Any) -> Any:
                return await self._called(hook, loop, task)

            return arun
        return lambda loop, task: self._called(hook, loop, task)


def _witnessed(target: Any, kind: str, out: TextIO) -> Any:
    """``target`` with each fresh backend or loop wrapped in a :class:`Witness`, numbered as made
    (a case builds one per variant it plays)."""
    made = [0]

    def label() -> str:
        made[0] += 1
        print(f"-- run {made[0]}", file=out)
        return f"run {made[0]} "

    if kind == "backend":
        build = target.create_backend
        return dataclasses.replace(target, create_backend=lambda url: Witness(build(url), out, label()))
    make = target.create_loop
    if target.run is None:
        return dataclasses.replace(target, create_loop=lambda url: Witness(make(url), out, label()))
    hook = target.run

    def run(loop: Any, task: Any) -> Any:
        return Witness(None, out, label()).hooked(hook)(loop, task)

    hooked = _arun(hook, out, label) if inspect.iscoroutinefunction(hook) else run
    return dataclasses.replace(target, run=hooked)


def _arun(hook: Callable[..., Any], out: TextIO, label: Callable[[], str]) -> Callable[..., Any]:
    async def run(loop: Any, task: Any) -> Any:
        return await Witness(None, out, label()).hooked(hook)(loop, task)

    return run


def explain(adapter: str, case_name: str, target_text: str = "", out: TextIO = sys.stdout) -> int:
    """Run ``case_name`` of ``adapter``'s targets (those whose name holds ``target_text``), printing
    what the library handed over on each call and the case's verdict; 0 where every run case passed."""
    from . import runner

    module = importlib.import_module(f"ecosystem.adapters.{adapter}")
    targets = [t for t in module.targets() if target_text in t.name]
    if not targets:
        names = ", ".join(t.name for t in module.targets())
        print(f"no target of {adapter} has {target_text!r} in its name; its targets: {names}", file=out)
        return 2
    status = 0
    for target in targets:
        witnessed = _witnessed(target, module.KIND, out)
        cases = [c for c in runner._cases(witnessed, module.KIND) if c.name == case_name]
        if not cases:
            known = sorted({c.name for c in runner._cases(target, module.KIND)})
            print(f"{target.name}: no case {case_name!r}; its cases: {', '.join(known)}", file=out)
            status = 2
            continue
        print(f"== {target.name} ({target.wire.name}) {case_name}", file=out)
        variants = cases[0].variants() if hasattr(cases[0], "variants") else ()
        if len(variants) > 1:
            print(f"variants, in the order they run: {', '.join(v.name for v in variants)}", file=out)
        try:
            cases[0].run()
        except unittest.SkipTest as skip:
            print(f"verdict: skip ({skip})", file=out)
        except AssertionError as failure:
            print("verdict: fail", file=out)
            print(str(failure), file=out)
            status = max(status, 1)
        except Exception as crash:  # noqa: BLE001 - shown as the table shows it
            print(f"verdict: error {type(crash).__name__}: {crash}", file=out)
            status = max(status, 1)
        else:
            print("verdict: pass", file=out)
        print(file=out)
    return status

"""What the SDK adapters share: silencing the warnings an SDK's own dependencies raise
about themselves. (Racing an SDK's await against the abort is the library's own
``conformance.race_abort``.)"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence, Type

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

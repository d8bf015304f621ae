"""The ``unittest`` mixin of app mode: one fake provider and its environment per test class.

Strategy: the class owns a :class:`~conformance.app.FakeProviderEnvironment` from
``setUpClass`` to ``tearDownClass``, so the application may build its clients in
``setUp``, in a test, or once for the class, from the environment as it does in
production. Each test starts with no script, scripts the provider and runs the application's function;
:meth:`AppConformanceTestCase.assertAppConforms` fails the test with the run's
report. At class teardown the findings of every run are written once each to
standard error, the end-of-run summary.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, ClassVar, Optional

from .environment import AppRun, FakeProviderEnvironment
from .script import ProviderScript

__all__ = ["AppConformanceTestCase"]


class AppConformanceTestCase:
    """Mix into :class:`unittest.TestCase` to hold an application's own code to the provider's contract.

    Class settings: ``app_timeout`` (seconds each run is given), ``app_http2`` (serve
    h2c only; by default HTTP/1.1 and h2c on one port), ``app_summary`` (write the
    findings to standard error at class teardown). The environment is
    ``cls.provider_environment``.
    """

    app_timeout: ClassVar[float] = 10.0
    app_http2: ClassVar[bool] = False
    app_summary: ClassVar[bool] = True
    provider_environment: ClassVar[Optional[FakeProviderEnvironment]] = None

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()  # type: ignore[misc]
        cls.provider_environment = FakeProviderEnvironment(
            timeout=cls.app_timeout, http2=cls.app_http2
        ).start()

    @classmethod
    def tearDownClass(cls) -> None:
        environment, cls.provider_environment = cls.provider_environment, None
        try:
            if environment is not None:
                environment.close()
                summary = environment.summary()
                if summary and cls.app_summary:
                    sys.stderr.write(f"\n{cls.__qualname__}: {summary}\n")
        finally:
            super().tearDownClass()  # type: ignore[misc]

    def setUp(self) -> None:
        """Each test starts with no script: every wire answers plainly until the test says otherwise."""
        super().setUp()  # type: ignore[misc]
        self._environment().reset()

    def _environment(self) -> FakeProviderEnvironment:
        environment = type(self).provider_environment
        if environment is None:
            raise RuntimeError(
                f"{type(self).__name__} has no provider environment: a setUpClass of its own must "
                "call super().setUpClass()"
            )
        return environment

    def script(self, wire: Any, what: str = "text", **options: Any) -> ProviderScript:
        """What the provider answers ``wire`` with next (:meth:`FakeProviderEnvironment.script`)."""
        return self._environment().script(wire, what, **options)

    def run_app(self, app: Callable[..., Any], *args: Any, **kwargs: Any) -> AppRun:
        """Run the application's function and judge it (:meth:`FakeProviderEnvironment.run`)."""
        return self._environment().run(app, *args, **kwargs)

    def assertAppConforms(self, app: Callable[..., Any], *args: Any, **kwargs: Any) -> AppRun:  # noqa: N802
        """Run the application's function; fail the test with the run's report where a check found one."""
        run = self.run_app(app, *args, **kwargs)
        if run.problems:
            raise AssertionError(run.report())
        return run

"""The pytest side of app mode: the ``fake_provider_environment`` fixture and the run's summary.

Strategy: pytest loads this module through the ``pytest11`` entry point the
distribution declares, so a project that has pytest gets the fixture with no
``conftest.py``; the package itself never imports pytest, and this module imports it
only as pytest loads it. The fixture gives each test a
:class:`~conformance.app.FakeProviderEnvironment` (the environment set for the test,
restored after it); what each test's runs found is gathered, and
``pytest_terminal_summary`` names each finding once at the end of the session.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest

from .environment import FakeProviderEnvironment, Finding, summary_of

__all__ = ["fake_provider_environment", "pytest_terminal_summary"]

#: Every finding of the session, by check and script, counted.
_FINDINGS: Dict[Tuple[str, str], Finding] = {}


def _gather(findings: List[Finding]) -> None:
    for finding in findings:
        key = (finding.check, finding.script)
        known = _FINDINGS.get(key)
        count = finding.count + (known.count if known else 0)
        _FINDINGS[key] = Finding(finding.check, finding.script, (known or finding).text, count)


@pytest.fixture
def fake_provider_environment() -> Iterator[FakeProviderEnvironment]:
    """A fake provider on loopback, every official SDK pointed at it through the environment."""
    environment = FakeProviderEnvironment().start()
    try:
        yield environment
    finally:
        environment.close()
        _gather(environment.findings)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Name each finding of the session's application runs once, after the tests."""
    text = summary_of(list(_FINDINGS.values()))
    if text:
        terminalreporter.section("conformance app mode")
        for line in text.splitlines():
            terminalreporter.write_line(line)

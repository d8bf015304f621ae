"""The conformance table: popular LLM clients and agent frameworks held to the kit's suites.

Not part of the package: the adapters import libraries the package never depends on.
``python3 dev.py ecosystem`` runs them (see :mod:`ecosystem.runner`).
"""

"""One module per library: ``LIBRARY``, ``KIND`` and ``targets()`` (see :mod:`ecosystem.runner`)."""

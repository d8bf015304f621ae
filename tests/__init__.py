"""The project's tests. Importing the package installs the run's hygiene checks (``hygiene``)."""

from .hygiene import install

install()

"""Developer sessions: tests, lint, typecheck, demo.

Each works on a fresh machine with only Python and the registries.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite against an embedded broker (or AIOPRODUCER_BOOTSTRAP, when set)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the package, tests, examples and this file."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "aioproducer", "tests", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "aioproducer")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install("-e", ".[snappy]", "mypy>=1.10")
    session.run("mypy", "--strict", "aioproducer")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: start an embedded broker, produce, read back, report. Pass options after `--`."""
    session.install("-e", ".[snappy,testing]")
    session.run("python", "examples/demo.py", *session.posargs)

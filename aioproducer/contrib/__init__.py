"""Integrations with other projects' libraries, each imported on its own (`aioproducer.contrib.prometheus`,
`aioproducer.contrib.opentelemetry`) so the core never needs them.

Owns the rule that importing one without its extra says which extra to install (`missing_extra`).
"""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(module: str, extra: str, cause: ImportError) -> ModuleNotFoundError:
    """The error for `import aioproducer.contrib.<module>` without its extra: still a ModuleNotFoundError (code that
    catches one keeps working), naming the missing library and the `pip install` that brings it."""
    error = ModuleNotFoundError(
        f"aioproducer.contrib.{module} needs the `{extra}` extra ({cause.name or cause} is missing): "
        f"pip install 'aioproducer[{extra}]'",
        name=cause.name,
    )
    error.__cause__ = cause
    return error

"""Importing a contrib module without its extra names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [("prometheus", "prometheus_client", "prometheus"), ("opentelemetry", "opentelemetry", "otel")],
)
def test_a_contrib_module_without_its_extra_names_the_extra(module: str, blocked: str, extra: str) -> None:
    """Bug: `import aioproducer.contrib.prometheus` (or `.opentelemetry`) without its extra raised a bare
    ModuleNotFoundError about a library the user never asked for, with no word of the extra that brings it."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "try:\n"
        f"    import aioproducer.contrib.{module}\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stderr  # still a ModuleNotFoundError: code catching one keeps working
    assert f"aioproducer.contrib.{module} needs the `{extra}` extra" in done.stdout
    assert f"pip install 'aioproducer[{extra}]'" in done.stdout

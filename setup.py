"""Builds the optional compiled parts, `aioproducer/_speedups.pyx` (the hot path) and
`aioproducer/columnar/_arrow.pyx` (the columnar accessors); everything else is in pyproject.toml.

Without a C compiler, or with AIOPRODUCER_NO_EXTENSIONS set, the build goes on and the package installs as pure
Python (slower, same behaviour).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed compile is a warning, not a failed install: the pure-Python twins take over."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any build failure means "no extension"
            print(f"aioproducer: building the compiled hot path failed, using pure Python: {exc}", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"aioproducer: compiling {ext.name} failed, using pure Python: {exc}", file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("AIOPRODUCER_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("aioproducer: Cython is not available, installing pure Python", file=sys.stderr)
        return []
    compiled = [
        Extension("aioproducer._speedups", ["aioproducer/_speedups.pyx"], extra_compile_args=["-O2"]),
        Extension("aioproducer.columnar._arrow", ["aioproducer/columnar/_arrow.pyx"], extra_compile_args=["-O2"]),
    ]
    built = []
    for extension in compiled:  # one at a time: a module that fails to translate leaves the other compiled
        try:
            built.extend(cythonize([extension], quiet=True))
        except Exception as exc:  # a translation failure also means "no extension"
            print(f"aioproducer: translating {extension.name} failed, using pure Python: {exc}", file=sys.stderr)
    return built


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

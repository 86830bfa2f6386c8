"""Compiling a Cython module that cimports aioproducer.columnar._arrow, as a caller outside the package would."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import aioproducer

ROOT = Path(aioproducer.__file__).parent.parent
WALKER = Path(__file__).with_name("walk_rows.pyx")


def build_walker(workdir: Path) -> ModuleType:
    """walk_rows.pyx, compiled (-O2) in `workdir` and imported."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    source = workdir / WALKER.name
    shutil.copy(WALKER, source)
    extension = Extension("walk_rows", [str(source)], extra_compile_args=["-O2"])
    modules = cythonize([extension], include_path=[str(ROOT)], quiet=True, build_dir=str(workdir / "c"))
    command = build_ext(Distribution({"ext_modules": modules}))
    command.build_lib, command.build_temp = str(workdir), str(workdir / "build")
    command.ensure_finalized()
    command.run()
    built = next(workdir.glob("walk_rows*.so"))
    spec = importlib.util.spec_from_file_location("walk_rows", built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""Builds the optional compiled twins of the hot path (every `aioproducer/**/_*.pyx`, each the twin of the Python
module of the same name); everything else is in pyproject.toml.

Without a C compiler, or with AIOPRODUCER_NO_EXTENSIONS set, the build goes on and the package installs as pure
Python (slower, same behaviour); a twin that fails to compile leaves its module on its pure-Python code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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


# The codec libraries the batch pipeline's worker calls without the GIL, when their headers are installed (Debian:
# liblz4-dev, libzstd-dev, libsnappy-dev; zlib is always needed): a codec without its library is compressed by the
# Python packages instead, on the event loop.
NATIVE_CODECS = [
    ("AIOPRODUCER_HAVE_LZ4", "lz4frame.h", "lz4", "LZ4F_compressFrame"),
    ("AIOPRODUCER_HAVE_ZSTD", "zstd.h", "zstd", "ZSTD_compressCCtx"),
    ("AIOPRODUCER_HAVE_SNAPPY", "snappy-c.h", "snappy", "snappy_compress"),
]


def configure_native_codecs(module: Extension) -> None:
    """Compile the pipeline with each codec library this machine can link, and with zlib and threads."""
    module.include_dirs.append(str(Path(module.sources[0]).parent))  # its C header sits beside it
    module.libraries.append("z")
    module.extra_compile_args.append("-pthread")
    module.extra_link_args.append("-pthread")
    found = []
    for macro, header, library, function in NATIVE_CODECS:
        if links(header, library, function):
            module.define_macros.append((macro, "1"))
            module.libraries.append(library)
            found.append(library)
    print(f"aioproducer: the batch pipeline compresses natively with zlib {' '.join(found)}", file=sys.stderr)


def links(header: str, library: str, function: str) -> bool:
    """Whether a program including `header` and calling `function` from `library` compiles and links here."""
    import tempfile

    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "probe.c"
        source.write_text(f"#include <{header}>\nint main(void) {{ return (void *)&{function} == (void *)0; }}\n")
        devnull = os.open(os.devnull, os.O_WRONLY)
        saved = os.dup(2)
        os.dup2(devnull, 2)  # a missing library's compiler errors are expected: keep them out of the build log
        try:
            objects = compiler.compile([str(source)], output_dir=scratch)
            compiler.link_executable(objects, "probe", output_dir=scratch, libraries=[library])
        except Exception:
            return False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(devnull)
    return True


def extensions() -> list[Extension]:
    if os.environ.get("AIOPRODUCER_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("aioproducer: Cython is not available, installing pure Python", file=sys.stderr)
        return []
    sources = sorted(Path("aioproducer").rglob("_*.pyx"))
    modules = [
        Extension(".".join(source.with_suffix("").parts), [str(source)], extra_compile_args=["-O2"])
        for source in sources
    ]
    for module in modules:
        if module.name == "aioproducer.send._pipeline":
            configure_native_codecs(module)
    translated: list[Extension] = []
    for module in modules:
        try:
            translated += cythonize([module], quiet=True)
        except Exception as exc:  # a translation failure also means "no twin": that module stays pure Python
            print(f"aioproducer: translating {module.name} failed, it stays pure Python: {exc}", file=sys.stderr)
    return translated


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

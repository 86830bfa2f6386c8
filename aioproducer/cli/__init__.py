"""The `aioproducer` command line: `produce`, `perf-test`, `check` and `broker` (console script and
`python -m aioproducer`).

Needs the extra `aioproducer[cli]` (rich, for progress and tables); argument parsing is the standard library's.
Exit status: 0 success, 1 something was not delivered or a check failed, 2 bad arguments or settings.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from aioproducer import __version__
from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError

__all__ = ["main"]

_EXTRA_HINT = "the aioproducer command needs the `cli` extra: pip install 'aioproducer[cli]'"


def build_parser() -> argparse.ArgumentParser:
    from aioproducer.cli import broker, check, perf, produce

    parser = argparse.ArgumentParser(
        prog="aioproducer",
        description="Produce to Kafka from the command line, measure a producer, diagnose a connection, run a "
        "development broker.",
    )
    parser.add_argument("--version", action="version", version=f"aioproducer {__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    produce.add_parser(commands)
    perf.add_parser(commands)
    check.add_parser(commands)
    broker.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from aioproducer.cli.display import Display
    except ImportError as exc:
        if getattr(exc, "name", "") and str(exc.name).startswith("rich"):
            print(_EXTRA_HINT, file=sys.stderr)
            return 2
        raise
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        # Said with the command's own usage (argparse would print the top-level one), e.g. a Java flag not taken.
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    display = Display()
    try:
        status: int = asyncio.run(args.run(args, display))
        return status
    except (ConfigError, InvalidRecordError) as exc:
        display.error(str(exc))
        return 2
    except AioProducerError as exc:
        display.error(f"{type(exc).__name__}: {exc}")
        return 2 if isinstance(exc, NotImplementedError) else 1
    except KeyboardInterrupt:
        display.error("interrupted")
        return 130

"""`chunkwise <verb>`: each verb is a module in :mod:`chunkwise.commands`.

A command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Errors caused by input (:class:`chunkwise.errors.ChunkwiseError`) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from chunkwise import __version__
from chunkwise.errors import ChunkwiseError

# verb -> module under chunkwise.commands (imported only when that verb runs, except for help)
COMMANDS: dict[str, str] = {
    "generate": "generate",
    "chunk": "chunk",
    "answer": "answer",
    "generate-data": "generate_data",
    "score": "score",
    "serve": "serve",
    "demo": "demo",
    "eval": "evaluate",
    "compare": "compare",
    "synth": "synth",
    "train": "train",
    "order": "order",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ``argv``, only the verb it names gets its arguments (each verb's
    flags are generated from its config's declaration, which need not be imported for the
    others)."""
    parser = argparse.ArgumentParser(
        prog="chunkwise",
        description="Long documents, short-context models: decode, evaluate, synthesize, train.",
    )
    parser.add_argument("--version", action="version", version=f"chunkwise {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    for verb, module_name in COMMANDS.items():
        module = importlib.import_module(f"chunkwise.commands.{module_name}")
        p = sub.add_parser(verb, help=module.HELP, description=module.HELP)
        if argv is None or verb == named:
            module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    from chunkwise.logs import setup_logging

    setup_logging(verbose=args.verbose)
    try:
        return int(args._run(args) or 0)
    except ChunkwiseError as e:
        from chunkwise.redact import redact

        sys.stderr.write(f"chunkwise {args.command}: error: {redact(str(e))}\n")  # one write
        return 2
    except KeyboardInterrupt:
        print(f"chunkwise {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

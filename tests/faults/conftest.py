"""Shared fixture of the fault tests: an in-process CLI runner that checks the one-line-error
contract (exit 2, no traceback). The catalogue of hostile JSON lines is in attacks.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from .attacks import BAD_LINES

__all__ = ["BAD_LINES", "CliResult"]  # BAD_LINES: importable from here too


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    def error_line(self) -> str:
        """The one error line of a refused command (exit 2, no traceback)."""
        assert self.rc == 2, (self.rc, self.err)
        assert "Traceback" not in self.err, self.err
        errors = [ln for ln in self.err.splitlines() if ": error: " in ln]
        assert len(errors) == 1, self.err
        return errors[0]


@pytest.fixture
def cli(monkeypatch, capsys) -> Callable[..., CliResult]:
    """``cli(verb, *args)``: ``chunkwise verb args`` in-process, with only that verb's module
    imported (others may be mid-rewrite); returns exit code, stdout, stderr."""
    from chunkwise import cli as cli_module

    every = dict(cli_module.COMMANDS)

    def run(verb: str, *args: object) -> CliResult:
        commands = {verb: every[verb]}
        monkeypatch.setattr(cli_module, "COMMANDS", commands)
        capsys.readouterr()
        rc = cli_module.main([verb, *map(str, args)])
        cap = capsys.readouterr()
        return CliResult(rc, cap.out, cap.err)

    return run

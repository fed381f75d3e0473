"""The settings file of a resumable synthesis run, and the check that a rerun matches it.

A run into an output folder writes the settings that shape its content (``config.json``) when
it starts. A rerun into the same folder continues it only with the same settings: records made
under other settings would mix silently into one file. :func:`check_settings` is that check,
shared by the LLM teacher (:mod:`chunkwise.synth.build`) and the oracle teacher
(:mod:`chunkwise.synth.oracle`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json, dumps_json, parse_json

log = logging.getLogger(__name__)

#: the file name of a run's settings inside its output folder
SETTINGS_FILE = "config.json"


def as_json(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as they read back from JSON (tuples become lists), so a comparison with
    a file written earlier compares like with like."""
    return json.loads(dumps_json(dict(settings)))


def settings_diff(have: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (recorded, requested)}`` for every key of ``want`` whose value differs."""
    return {k: (have.get(k), want[k]) for k in want if have.get(k) != want[k]}


def _read(path: Path) -> dict[str, Any]:
    try:
        have = parse_json(path.read_bytes())
    except ValueError as e:
        raise BadInput(f"{path} is not valid JSON ({e}); delete it or use a new --out") from None
    if not isinstance(have, dict):
        raise BadInput(f"{path} is not a JSON object of settings; delete it or use a new --out")
    return have


def check_settings(
    path: Path,
    want: Mapping[str, Any],
    *,
    override: bool = False,
    override_flag: str | None = None,
) -> None:
    """Write ``want`` to ``path`` on a first run; on a rerun, refuse other settings.

    The refusal names each setting that differs (recorded -> requested). With ``override``
    the new settings are recorded instead (the run goes on with them, a warning says which
    changed); ``override_flag`` is the command-line flag that does so, named in the error.
    """
    want = as_json(want)
    if path.exists():
        diff = settings_diff(_read(path), want)
        if not diff:
            return
        shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
        if not override:
            also = (
                f", or pass {override_flag} to continue it with the new ones"
                if override_flag
                else ""
            )
            raise BadInput(
                f"{path.parent} was started with other settings ({shown}); rerun with the same "
                f"settings to continue it, or use a new --out{also}"
            )
        log.warning("%s: continuing with changed settings (%s)", path.parent, shown)
    atomic_write_json(path, want)


__all__ = ["SETTINGS_FILE", "as_json", "check_settings", "settings_diff"]

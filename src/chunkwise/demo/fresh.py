"""`chunkwise demo --fresh`: start a demo folder over, deleting only what a demo made.

A folder is deleted only when its stage ledger (``demo.json``, written by
:class:`chunkwise.demo.pipeline.Demo`) is there and reads as one, and never when it is (or
holds) the working directory, the home folder or ``/``. Everything else is refused with a
one-line :class:`BadInput`, and nothing is deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from chunkwise.errors import BadInput

LEDGER = "demo.json"
#: keys every demo ledger has (see Demo.load_state)
LEDGER_KEYS = ("size", "model", "seed", "stages")


def _refuse(out: Path, why: str) -> BadInput:
    return BadInput(
        f"--fresh: refusing to delete {out}: {why}; delete it yourself if you mean to, or "
        "give another --out"
    )


def check_removable(out: Path) -> bool:
    """Whether ``out`` exists and may be deleted by ``--fresh`` (False: nothing there);
    raises :class:`BadInput` when it exists and is not a demo folder this run may remove."""
    if not out.exists() and not out.is_symlink():
        return False
    if out.is_symlink():
        raise _refuse(out, "it is a symbolic link")
    if not out.is_dir():
        raise _refuse(out, "it is a file, not a demo folder")
    real = out.resolve()
    for name, place in (("the working directory", Path.cwd()), ("your home folder", Path.home())):
        place = place.resolve()
        if place == real or real in place.parents:
            raise _refuse(out, f"it is or holds {name} ({place})")
    if real == Path(real.anchor):
        raise _refuse(out, "it is a filesystem root")
    ledger = out / LEDGER
    if not ledger.is_file():
        raise _refuse(out, f"it has no {LEDGER}, so chunkwise demo did not make it")
    from chunkwise.io import read_json

    try:
        state = read_json(ledger)
    except BadInput as e:
        raise _refuse(out, f"its {LEDGER} is unreadable ({e})") from None
    if not isinstance(state, dict) or any(k not in state for k in LEDGER_KEYS):
        raise _refuse(out, f"its {LEDGER} is not a demo ledger")
    return True


def remove_demo_folder(out: Path) -> bool:
    """Delete ``out`` if :func:`check_removable` allows it; whether anything was deleted."""
    if not check_removable(out):
        return False
    shutil.rmtree(out)
    return True


__all__ = ["check_removable", "remove_demo_folder"]

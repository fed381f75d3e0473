"""Logging set-up shared by every command: concise lines on stderr."""

from __future__ import annotations

import logging
import os
import warnings


def setup_logging(verbose: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        force=True,
    )
    # Third-party chatter that hides our own progress lines.
    for name in ("httpx", "urllib3", "filelock", "datasets", "transformers", "accelerate"):
        logging.getLogger(name).setLevel(logging.WARNING if not verbose else logging.INFO)
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        warnings.filterwarnings("ignore", category=FutureWarning)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)

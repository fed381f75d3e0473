"""WordNet 3.0 for METEOR, from local files only (never downloaded).

Debian's ``wordnet-base`` and ``wordnet-sense-index`` packages put the WordNet 3.0 database in
``/usr/share/wordnet``. nltk refuses files reached through links, so :func:`install_wordnet`
copies the files into an nltk data folder and writes the ``lexnames`` file the Debian packages
lack::

    apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index
    python -m chunkwise.benchmarks.narrativeqa.wordnet install-wordnet   # into <venv>/nltk_data

When no installed corpus is found at run time, the same copy is made on first use into
``$CHUNKWISE_CACHE`` (default ``~/.cache/chunkwise``)/nltk_data, from local files only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from chunkwise.errors import MissingDependency

DEBIAN_WORDNET = Path("/usr/share/wordnet")
#: WordNet 3.0's lexicographer files: number, name (category from the name's prefix)
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_NEEDED = ("data.noun", "index.noun", "index.sense", "noun.exc", "lexnames")
_WN_LOCK = threading.Lock()


def lexnames_text() -> str:
    return "".join(
        f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES)
    )


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _NEEDED)


def install_wordnet(dest: str | Path | None = None, source: str | Path | None = None) -> Path:
    """Copy a local WordNet 3.0 database (default: Debian's, ``$WNSEARCHDIR`` or
    /usr/share/wordnet) into ``<dest>/corpora/wordnet`` with a ``lexnames`` file, where nltk
    reads it. ``dest`` defaults to ``<sys.prefix>/nltk_data`` (on nltk's search path).
    Returns the corpus folder."""
    src = Path(source or os.environ.get("WNSEARCHDIR") or DEBIAN_WORDNET)
    if not (src / "data.noun").is_file() or not (src / "index.sense").is_file():
        raise MissingDependency(
            f"a WordNet 3.0 database (none in {src})",
            "apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index",
        )
    root = Path(dest) if dest else Path(sys.prefix) / "nltk_data"
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith("."):
            # real copies: nltk refuses symlinks and hard links out of its data roots
            shutil.copyfile(f, target / f.name)
    if not (target / "lexnames").is_file():
        (target / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    return target


def _cache_root() -> Path:
    return (
        Path(os.environ.get("CHUNKWISE_CACHE", Path.home() / ".cache" / "chunkwise")) / "nltk_data"
    )


@cache
def _load_wordnet(root: str):
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    if root not in nltk.data.path:
        nltk.data.path.append(root)  # nltk only reads corpora under its data roots
    folder = nltk.data.FileSystemPathPointer(str(Path(root) / "corpora" / "wordnet"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*multilingual.*")
        return WordNetCorpusReader(folder, None)


def wordnet_corpus():
    """nltk's WordNet reader over local files; copies Debian's database into a cache on first
    use when nltk has none. Raises :class:`MissingDependency` naming the install step."""
    import nltk

    with _WN_LOCK:
        for root in [*nltk.data.path, str(_cache_root())]:
            if _complete(Path(root) / "corpora" / "wordnet"):
                return _load_wordnet(str(root))
        install_wordnet(_cache_root())
        return _load_wordnet(str(_cache_root()))


def _main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chunkwise.benchmarks.narrativeqa.wordnet")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("install-wordnet", help="copy local WordNet files where nltk finds them")
    p.add_argument("--dest", default=None, help="nltk data root (default <sys.prefix>/nltk_data)")
    p.add_argument("--source", default=None, help="WordNet dict folder (default Debian's)")
    args = ap.parse_args(argv)
    try:
        folder = install_wordnet(args.dest, args.source)
    except MissingDependency as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())


__all__ = ["LEXNAMES", "install_wordnet", "lexnames_text", "wordnet_corpus"]

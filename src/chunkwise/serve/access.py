"""Who the server answers: :class:`Access` is the policy of ``Host`` names answered and web
pages (``Origin``) trusted, worked out from the bound address; :func:`host_name`,
:func:`origin_key` and :func:`key_matches` read the ``Host``, ``Origin`` and
``Authorization`` headers it is checked against."""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from chunkwise.serve.limits import LOOPBACK


def key_matches(header: str | None, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer KEY``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    ok = hmac.compare_digest(given.strip().encode("utf-8"), key.encode("utf-8"))
    return ok and scheme.lower() == "bearer"


Origin = tuple[str, str, int]  # (scheme, host, port) of a web page
_ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class Access:
    """Which ``Host`` names the server answers to and which web pages (``Origin``) it trusts.

    ``hosts`` None answers any Host. ``origins`` are the server's own (exact scheme, host and
    port); a page on one of ``origin_hosts`` is trusted on any port."""

    hosts: frozenset[str] | None
    origins: frozenset[Origin]
    origin_hosts: frozenset[str] = frozenset()

    @classmethod
    def for_bind(cls, host: str, port: int, allowed_hosts: Iterable[str] = ()) -> Access:
        """The policy of a server bound at ``host:port``. Bound to loopback, it answers only
        to the loopback names (and ``allowed_hosts``): a DNS-rebinding page, whose Host is its
        own name, is refused. Bound beyond loopback (``0.0.0.0``, a LAN address), where an API
        key is required anyway, it answers to any Host unless ``allowed_hosts`` names them
        (``*`` in them: any). Its own pages are ``http://NAME:PORT`` for the bound names (the
        loopback names for loopback and ``0.0.0.0``); pages on ``allowed_hosts`` are trusted."""
        extra = frozenset(h.strip().strip("[]").lower() for h in allowed_hosts if h.strip())
        bound = host.strip("[]").lower()
        own = LOOPBACK if bound in LOOPBACK | _ANY_ADDRESS else frozenset({bound})
        hosts = None if "*" in extra or not (extra or bound in LOOPBACK) else own | extra
        return cls(hosts, own_origins(own, port), extra - {"*"})


_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\[\]:/@?#\s]+)(?::[0-9]{1,5})?")


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``[::1]:8000`` -> ``::1``), lowercased; None if it is
    not a plain ``host[:port]``."""
    m = _HOST.fullmatch(value.strip())
    return m.group(1).strip("[]").lower() if m else None


def origin_key(origin: str) -> Origin | None:
    """``(scheme, host, port)`` of an ``Origin`` header, default ports filled in; None for
    ``null`` or anything that is not ``http(s)://host[:port]``."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def own_origins(names: frozenset[str], port: int) -> frozenset[Origin]:
    """The origins of the server's own pages: ``http://NAME:PORT`` for each name it binds."""
    return frozenset(("http", n.lower(), port) for n in names)

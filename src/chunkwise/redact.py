"""Credentials out of everything chunkwise records or logs.

A model spec or base URL may carry secrets: ``openai:m@http://user:pass@host/v1`` (user info)
or ``...?api_key=sk-...`` (a query parameter). :func:`redact` rewrites every URL in a text so
that neither survives (``http://***@host/v1``, ``api_key=***``); :func:`redact_obj` does it to
every string in a JSON-like value (configs, results, prediction lines, wandb config). Call one
of them wherever a spec or URL is written to disk, sent to wandb or logged.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

#: query parameters treated as secrets (compared case-insensitively, "-" and "_" ignored)
SECRET_PARAMS = frozenset(
    {
        "apikey",
        "key",
        "token",
        "accesstoken",
        "authtoken",
        "auth",
        "authorization",
        "password",
        "passwd",
        "pwd",
        "secret",
        "clientsecret",
        "sig",
        "signature",
        "bearer",
    }
)

# scheme://[userinfo@]rest, up to whitespace, a quote or a closing bracket
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>\]\)]*)")
# a bare ?key=value / &key=value anywhere else (e.g. a spec's option string)
_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[A-Za-z0-9_\-]+)=(?P<value>[^&#\s'\",;)\]]*)")


def _is_secret(name: str) -> bool:
    return name.lower().replace("-", "").replace("_", "") in SECRET_PARAMS


def _redact_params(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if _is_secret(m.group("name")) and m.group("value"):
            return f"{m.group('lead')}{m.group('name')}={MASK}"
        return m.group(0)

    return _PARAM.sub(sub, text)


def _redact_url(m: re.Match[str]) -> str:
    rest = m.group("rest")
    slash = rest.find("/")
    authority = rest if slash == -1 else rest[:slash]
    tail = "" if slash == -1 else rest[slash:]
    at = authority.rfind("@")
    if at != -1:
        authority = MASK + authority[at:]
    return m.group("scheme") + authority + tail


def redact(text: str) -> str:
    """``text`` with user info of every URL and secret query parameters masked."""
    if not isinstance(text, str) or not text:
        return text
    if "://" in text:
        text = _URL.sub(_redact_url, text)
    if "=" in text:
        text = _redact_params(text)
    return text


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with :func:`redact` applied to every string in it."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def has_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text) != text


__all__ = ["MASK", "SECRET_PARAMS", "has_secret", "redact", "redact_obj"]

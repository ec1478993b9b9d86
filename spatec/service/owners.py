"""Who may do what: API tokens, the page's token, the checks on every request.

- **Tokens.** ``SPATEC_TOKENS`` (``NAME:SECRET,NAME:SECRET``) or the file
  ``<state>/tokens`` (a line ``NAME SECRET`` per token; ``#`` comments). A request
  names itself with ``Authorization: Bearer SECRET``; its identity is the token's NAME.
  Without either, ``spatec serve`` on a loopback address makes one token, ``local``,
  in ``<state>/tokens`` (mode 0600: readable by its owner only); on any other address
  it refuses to start. Secrets are compared by their SHA-256, in constant time.
- **Owners.** Every subscription belongs to the identity that made it: only that
  identity lists, reads, renews, deletes or reads the alerts of it.
- **The page** has a token of its own (``<state>/page-token``), with the identity
  ``page``: ``/?key=PAGE_TOKEN`` sets it as an HttpOnly, SameSite=Strict cookie and sends
  the browser on to ``/`` (so the address bar and the history hold no secret). The page
  may make SSE subscriptions only (never a push delivery: a page must not make the
  service post elsewhere), read the program and positions, and acknowledge alerts.
- **Host and Origin.** A request's ``Host`` must be one the service answers to (its
  address, ``localhost``, or ``--allowed-host``); a request that changes anything and
  comes from a browser (``Origin``) must come from the service's own origin or an
  ``--allowed-origin``, and its body must be ``application/json``: a cross-site form's
  ``text/plain`` POST is refused before anything reads it.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from spatec.errors import SpatecError

log = logging.getLogger("spatec.service")

PAGE = "page"
COOKIE = "spatec_page"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_SECRET = 16


class TokenError(SpatecError):
    """Tokens that cannot be used (a malformed file or variable)."""


@dataclass(frozen=True)
class Identity:
    name: str
    page: bool = False       # the operations page: SSE subscriptions only


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


class Tokens:
    """Secrets (by digest) → identities."""

    def __init__(self, named: dict[str, str], page_secret: str | None = None):
        self._by_digest = {_digest(s): Identity(n) for n, s in named.items()}
        self._page = _digest(page_secret) if page_secret else None
        self.names = sorted(named)

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def identify(self, secret: str | None) -> Identity | None:
        if not secret:
            return None
        d = _digest(secret)
        found = None
        for k, ident in self._by_digest.items():       # constant time in which one matches
            if hmac.compare_digest(k, d):
                found = ident
        if self._page is not None and hmac.compare_digest(self._page, d):
            found = Identity(PAGE, page=True)
        return found

    @classmethod
    def load(cls, state: Path, create: bool, env: str | None = None) -> "Tokens":
        """The tokens of ``SPATEC_TOKENS`` or ``<state>/tokens`` (made with one token when
        ``create`` and neither exists), with the page's token (made if missing)."""
        state = Path(state)
        env = os.environ.get("SPATEC_TOKENS") if env is None else env
        if env:
            named = _parse(env.replace(",", "\n").replace(":", " "), "SPATEC_TOKENS")
        else:
            path = state / "tokens"
            if not path.exists() and create:
                _write_secret(path, f"# spatec serve API tokens: NAME SECRET, one a line\nlocal {secrets.token_urlsafe(24)}\n")
                log.warning("no API token configured: made one, `local`, in %s", path)
            named = _parse(path.read_text(encoding="utf-8"), str(path)) if path.exists() else {}
        page_path = state / "page-token"
        if not page_path.exists():
            _write_secret(page_path, secrets.token_urlsafe(24) + "\n")
        page = page_path.read_text(encoding="utf-8").strip()
        return cls(named, page)

    @staticmethod
    def page_secret(state: Path) -> str:
        return (Path(state) / "page-token").read_text(encoding="utf-8").strip()


def _parse(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenError(f"{where}:{n}: a token is NAME SECRET")
        name, secret = parts
        if not _NAME.match(name) or name == PAGE:
            raise TokenError(f"{where}:{n}: token name {name!r}: letters, digits, `_.-`, at most 64, not `page`")
        if len(secret) < MIN_SECRET:
            raise TokenError(f"{where}:{n}: the secret of {name} is shorter than {MIN_SECRET} characters")
        if name in out:
            raise TokenError(f"{where}:{n}: token {name} is given twice")
        out[name] = secret
    return out


def _write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind: str, extra=()) -> list[str]:
    """The ``Host`` names the service answers to."""
    out = {"127.0.0.1", "localhost", "[::1]", "::1", *extra}
    if bind and bind not in ("0.0.0.0", "::", ""):
        out.add(bind)
    elif bind in ("0.0.0.0", "::"):
        out |= {socket.gethostname(), socket.getfqdn()}
    return sorted(out)

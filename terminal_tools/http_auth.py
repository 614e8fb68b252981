"""The HTTP transport's door: fixed bearer tokens, one per principal, and 401s in words.

A token comes from ``TERMINAL_TOOLS_TOKEN`` (principal ``default``), from a tokens file
(``TERMINAL_TOOLS_TOKENS_FILE``: one ``NAME TOKEN`` per line, each name a principal), or
is generated at start and printed to stderr. Every request must carry
``Authorization: Bearer <token>``; a missing or wrong one gets a 401 whose body says
what is required and where the token comes from (FastMCP's own wording is about OAuth
re-registration, which does not apply to a fixed token).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable
from typing import Any

from fastmcp.server.auth import AccessToken, TokenVerifier
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from .config import Settings, env_name

DEFAULT_PRINCIPAL = "default"
MIN_TOKEN_CHARS = 16


class TokenError(ValueError):
    pass


def load_tokens(settings: Settings) -> dict[str, str]:
    """Token -> principal, from the settings; empty when none is configured."""
    tokens: dict[str, str] = {}
    if settings.token:
        if len(settings.token) < MIN_TOKEN_CHARS:
            raise TokenError(
                f"{env_name('token')} is shorter than {MIN_TOKEN_CHARS} characters; a short "
                "token can be guessed by anyone who can reach the port"
            )
        tokens[settings.token] = DEFAULT_PRINCIPAL
    if settings.tokens_file:
        for name, token in read_tokens_file(settings.tokens_file):
            if token in tokens:
                raise TokenError(f"{settings.tokens_file}: token of {name!r} is used twice")
            tokens[token] = name
    return tokens


def read_tokens_file(path: str) -> list[tuple[str, str]]:
    """``NAME TOKEN`` lines; blank lines and ``#`` comments are skipped."""
    try:
        with open(path, encoding="utf-8") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read()
    except OSError as exc:
        raise TokenError(f"cannot read the tokens file {path}: {exc.strerror}") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"the tokens file {path} is readable by other users; chmod 600 it")
    entries: list[tuple[str, str]] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenError(f"{path}:{number}: expected 'NAME TOKEN'")
        name, token = parts
        if name in names:
            raise TokenError(f"{path}:{number}: principal {name!r} is listed twice")
        if len(token) < MIN_TOKEN_CHARS:
            raise TokenError(
                f"{path}:{number}: the token of {name!r} is shorter than {MIN_TOKEN_CHARS} "
                "characters"
            )
        names.add(name)
        entries.append((name, token))
    if not entries:
        raise TokenError(f"the tokens file {path} lists no tokens")
    return entries


class TokenTable(TokenVerifier):
    """Fixed tokens, each naming a principal (the access token's ``client_id``)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        super().__init__()
        self._tokens = dict(tokens)

    def principal(self, candidate: str) -> str | None:
        found = None
        for token, name in self._tokens.items():
            # Compare against every entry, in constant time each.
            if hmac.compare_digest(candidate.encode(), token.encode()):
                found = name
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        name = self.principal(token)
        if name is None:
            return None
        return AccessToken(token=token, client_id=name, scopes=[])


def unauthorized_body(*, sent_token: bool) -> bytes:
    problem = "the bearer token is wrong" if sent_token else "no bearer token was sent"
    description = (
        f"terminal-tools requires a bearer token and {problem}. Send the header "
        "'Authorization: Bearer <token>'. The token is the value of "
        f"{env_name('token')} (or a named token from {env_name('tokens_file')}) where the "
        "server was started; if neither was set, the server generated one and printed it "
        "to its stderr at start ('HTTP bearer token ...')."
    )
    return json.dumps({"error": "invalid_token", "error_description": description}).encode()


class BearerGate:
    """ASGI middleware in front of the MCP app: every HTTP request needs a known token."""

    def __init__(self, app: ASGIApp, table: TokenTable) -> None:
        self.app = app
        self.table = table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = None
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization" and value[:7].lower() == b"bearer ":
                token = value[7:].decode("latin-1").strip()
        if token and self.table.principal(token) is not None:
            await self.app(scope, receive, send)
            return
        body = unauthorized_body(sent_token=token is not None)
        challenge = b'Bearer realm="terminal-tools"'
        if token is not None:
            challenge += b', error="invalid_token"'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def prepare(settings: Settings, announce: Callable[[str], None]) -> tuple[TokenTable, list[Any]]:
    """The verifier for FastMCP and the ASGI middleware for ``run()``; generates (and
    announces) a token when none is configured."""
    tokens = load_tokens(settings)
    if not tokens:
        generated = secrets.token_urlsafe(32)
        announce(
            f"terminal-tools: HTTP bearer token (set {env_name('token')} to choose one): "
            f"{generated}"
        )
        tokens = {generated: DEFAULT_PRINCIPAL}
    table = TokenTable(tokens)
    return table, [Middleware(BearerGate, table=table)]

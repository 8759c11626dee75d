"""The official MCP Python SDK's OAuth clients against an MCP server that is an OAuth
2.1 resource server of the issuer oidc.mjs runs: what a Python agent goes through to
reach a protected toolgraft server.

  alice, bob  client credentials (`ClientCredentialsOAuthProvider`), pre-registered
              confidential clients of the issuer: alice may have tools:read and
              notes:write, bob tools:read only;
  alice-opaque  alice again (sub alice), through a client whose access tokens are
              opaque: the server introspects them (RFC 7662); the transcript shows
              what the issuer's introspection says of them;
  carol       a user: dynamic client registration, then the authorization code flow
              with PKCE (`OAuthClientProvider`), her login and consent posted to the
              issuer's development forms by the callback handler, no browser.

Each caller: discovery from the 401 (the resource_metadata it names, then the
authorization server's metadata), a token, its claims (decoded, not verified),
`tools/list` (the tools this caller sees), calls; then a call that needs a scope the
token lacks, answered 403 insufficient_scope: the SDK asks for the union of the
scopes it had and the one challenged, which the issuer grants alice and carol and
refuses bob (invalid_scope), and the call fails. Last, a made-up bearer token is
answered 401 with an `invalid_token` challenge.

Every HTTP request a client makes is printed (method, URL, status, and what matters
of it), so the output is a transcript of the flows. What the server is expected to
answer is set at the top of this file (EXPECTED): change it there for the server
under test.

Usage: python_oauth.py <mcp-url> [<issuer>]   (the issuer defaults to
$TOOLGRAFT_OIDC_ISSUER). Exits non-zero, saying what differed, on the first check
that fails.
"""

import asyncio
import base64
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import ClientSession, MCPError
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# ---------------------------------------------------------------------------
# What the server under test is expected to answer. The issuer's side (clients,
# secrets, tenants, scopes allowed) is fixed in oidc.mjs.


@dataclass
class Caller:
    name: str
    # client credentials: the client's secret and how it authenticates; None: a user
    # logging in through the authorization code flow (DCR + PKCE)
    secret: str | None
    auth: str = "client_secret_basic"
    sub: str = ""
    tenant: str = ""
    # the scope of the first token: what the 401's WWW-Authenticate asks for
    first_scope: set[str] = field(default_factory=set)
    # the tools tools/list shows this caller, exactly
    tools: set[str] = field(default_factory=set)
    # calls that must succeed: (tool, arguments, text the result contains)
    calls: list[tuple[str, dict, str]] = field(default_factory=list)
    # tools this caller must not be able to call (not listed: an unknown tool)
    hidden: list[str] = field(default_factory=list)
    # whether the step-up to STEP_UP_SCOPE succeeds (the issuer allows the scope)
    steps_up: bool = False
    # whether its access tokens are opaque (not JWTs): read through introspection
    opaque: bool = False


# The tool whose call needs a scope the first token lacks (403 insufficient_scope).
STEP_UP_TOOL = ("write_note", {"text": "from python_oauth"}, "noted")
STEP_UP_SCOPE = "notes:write"

EXPECTED = [
    Caller(
        "alice",
        secret="alice-secret",
        auth="client_secret_basic",
        sub="alice",
        tenant="acme",
        first_scope={"tools:read"},
        tools={"whoami", "list_notes", "write_note", "acme_report"},
        calls=[("whoami", {}, "alice of acme"), ("acme_report", {}, "acme")],
        hidden=["admin_reset"],
        steps_up=True,
    ),
    Caller(
        "bob",
        secret="bob-secret",
        auth="client_secret_post",
        sub="bob",
        tenant="globex",
        first_scope={"tools:read"},
        tools={"whoami", "list_notes", "write_note"},
        calls=[("whoami", {}, "bob of globex"), ("list_notes", {}, "[]")],
        hidden=["acme_report", "admin_reset"],
        steps_up=False,
    ),
    Caller(
        "alice-opaque",
        secret="alice-opaque-secret",
        auth="client_secret_basic",
        sub="alice",
        tenant="acme",
        first_scope={"tools:read"},
        tools={"whoami", "list_notes", "write_note", "acme_report"},
        calls=[("whoami", {}, "alice of acme"), ("list_notes", {}, "[")],
        hidden=["admin_reset"],
        steps_up=True,
        opaque=True,
    ),
    Caller(
        "carol",
        secret=None,
        sub="carol",
        tenant="acme",
        first_scope={"tools:read"},
        tools={"whoami", "list_notes", "write_note", "acme_report"},
        calls=[("whoami", {}, "carol of acme")],
        hidden=["admin_reset"],
        steps_up=True,
    ),
]
# The client the script introspects opaque tokens as, to show and check what they
# say (oidc.mjs allows it alone to introspect; the server under test uses it too).
INTROSPECTOR = ("toolgraft-rs", "toolgraft-rs-secret")
# Where the authorization code flow sends the browser back: nothing listens there,
# the callback handler reads the code off the redirect.
REDIRECT_URI = "http://127.0.0.1:9/callback"

# ---------------------------------------------------------------------------


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"python oauth: {what}")


def say(who: str, text: str) -> None:
    print(f"{who:>12} | {text}", flush=True)


def claims_of(token: str) -> tuple[dict, dict]:
    """A JWT's header and claims, decoded, not verified (the server verifies)."""

    def part(segment: str) -> dict:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))

    check(token.count(".") == 2, f"the access token is not a JWT: {token[:20]}...")
    header, payload, _ = token.split(".")
    return part(header), part(payload)


def described(request: httpx2.Request) -> str:
    """What matters of a request for the transcript (never a secret)."""
    notes = []
    content_type = request.headers.get("content-type", "")
    try:
        body = request.content
    except httpx2.RequestNotRead:
        body = b""
    if content_type.startswith("application/json") and body:
        message = json.loads(body)
        if isinstance(message, dict) and "method" in message:
            name = (message.get("params") or {}).get("name")
            notes.append(message["method"] + (f" {name}" if name else ""))
        elif isinstance(message, dict) and "redirect_uris" in message:
            notes.append(f"register {json.dumps({k: message[k] for k in ('grant_types', 'scope', 'token_endpoint_auth_method') if k in message})}")
    elif content_type.startswith("application/x-www-form-urlencoded") and body:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        shown = {k: form[k] for k in ("grant_type", "scope", "resource", "prompt", "login") if k in form}
        if "code_verifier" in form:
            shown["code_verifier"] = "..."
        if "client_secret" in form:
            shown["client_id"] = form.get("client_id")
            shown["client_secret"] = "..."
        notes.append(" ".join(f"{k}={v}" for k, v in shown.items()))
    authorization = request.headers.get("authorization", "")
    if authorization:
        notes.append(f"Authorization: {authorization.split()[0]} ...")
    return "; ".join(n for n in notes if n)


class Transcript:
    """httpx2 event hooks printing each request a client makes, with its answer."""

    def __init__(self, who: str):
        self.who = who
        self.seen: list[tuple[str, str, int]] = []

    async def response(self, response: httpx2.Response) -> None:
        request = response.request
        url = str(request.url)
        shown = url if len(url) < 110 else url[:107] + "..."
        line = f"{request.method} {shown} -> {response.status_code}"
        notes = described(request)
        if notes:
            line += f"  [{notes}]"
        say(self.who, line)
        challenge = response.headers.get("www-authenticate")
        if challenge:
            say(self.who, f"    WWW-Authenticate: {challenge}")
        location = response.headers.get("location")
        if location and 300 <= response.status_code < 400:
            say(self.who, f"    Location: {location if len(location) < 110 else location[:107] + '...'}")
        self.seen.append((request.method, url, response.status_code))

    def hooks(self) -> dict:
        return {"response": [self.response]}


class Memory:
    """TokenStorage in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """The user's side of the authorization code flow, without a browser: follows the
    authorization URL through oidc-provider's login and consent forms (posting them
    as `login`) to the redirect back to REDIRECT_URI, and hands the SDK the code."""

    def __init__(self, login: str):
        self.login = login
        self.url: str | None = None
        self.transcript = Transcript(f"{login}*")
        # The user's browser keeps its cookies (the issuer's session) between logins.
        self.client = httpx2.AsyncClient(event_hooks=self.transcript.hooks(), timeout=10)

    async def redirect_handler(self, url: str) -> None:
        self.url = url

    async def callback_handler(self) -> AuthorizationCodeResult:
        check(self.url is not None, "the callback handler ran before the redirect handler")
        url, self.url = self.url, None
        query = parse_qs(urlparse(url).query)
        say(self.transcript.who, f"(browser) authorization request: scope={query.get('scope', [''])[0]} "
            f"resource={query.get('resource', [''])[0]} code_challenge_method={query.get('code_challenge_method', [''])[0]}")
        method, data = "GET", None
        for _ in range(12):
            response = await self.client.request(method, url, data=data)
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                method, data = "GET", None
                if url.startswith(REDIRECT_URI):
                    params = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
                    if "error" in params:
                        raise OAuthFlowError(f"the authorization server answered {params}")
                    return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))
                continue
            check(response.status_code == 200, f"the interaction answered {response.status_code}: {response.text[:300]}")
            action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            prompt = re.search(r'name="prompt" value="([^"]+)"', response.text)
            check(action is not None and prompt is not None, f"no form at {url}: {response.text[:300]}")
            url = urljoin(url, action.group(1))
            method = "POST"
            if prompt.group(1) == "login":
                data = {"prompt": "login", "login": self.login, "password": "any"}
            else:
                data = {"prompt": prompt.group(1)}
        sys.exit("python oauth: the authorization flow did not reach the redirect URI")


def provider_for(caller: Caller, url: str, issuer: str, storage: Memory) -> tuple[httpx2.Auth, Browser | None]:
    if caller.secret is not None:
        return (
            ClientCredentialsOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=caller.name,
                client_secret=caller.secret,
                token_endpoint_auth_method=caller.auth,
                issuer=issuer,
            ),
            None,
        )
    browser = Browser(caller.name)
    metadata = OAuthClientMetadata(
        client_name=f"python_oauth for {caller.name}",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return (
        OAuthClientProvider(
            server_url=url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        ),
        browser,
    )


async def introspected(token: str, issuer: str) -> dict:
    """What the issuer's introspection endpoint (from its RFC 8414 metadata) says of
    an opaque token, asked as INTROSPECTOR."""
    async with httpx2.AsyncClient(timeout=10) as http:
        metadata = (await http.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
        response = await http.post(metadata["introspection_endpoint"], data={"token": token}, auth=INTROSPECTOR)
        check(response.status_code == 200, f"introspection answered {response.status_code}: {response.text[:200]}")
        return response.json()


async def show_token(caller: Caller, token: OAuthToken, url: str, issuer: str, scope: set[str]) -> None:
    if caller.opaque:
        check(token.access_token.count(".") != 2, f"{caller.name}: the access token is a JWT, expected an opaque one")
        claims = await introspected(token.access_token, issuer)
        shown = {k: claims.get(k) for k in ("active", "iss", "sub", "aud", "client_id", "scope", "tenant")}
        say(caller.name, f"token: opaque ({len(token.access_token)} characters) expires_in={token.expires_in} "
            f"refresh_token={'yes' if token.refresh_token else 'no'}")
        say(caller.name, f"    introspected {json.dumps(shown)}")
        check(claims.get("active") is True, f"{caller.name}: the issuer says the token is not active")
    else:
        header, claims = claims_of(token.access_token)
        show_jwt(caller, token, header, claims)
    check(claims.get("iss") == issuer, f"{caller.name}: iss {claims.get('iss')}, expected {issuer}")
    check(claims.get("sub") == caller.sub, f"{caller.name}: sub {claims.get('sub')}, expected {caller.sub}")
    check(claims.get("aud") == url, f"{caller.name}: aud {claims.get('aud')}, expected the MCP URL {url}")
    check(claims.get("tenant") == caller.tenant, f"{caller.name}: tenant {claims.get('tenant')}, expected {caller.tenant}")
    granted = set((claims.get("scope") or "").split())
    check(granted == scope, f"{caller.name}: scope {sorted(granted)}, expected {sorted(scope)}")


def show_jwt(caller: Caller, token: OAuthToken, header: dict, claims: dict) -> None:
    shown = {k: claims.get(k) for k in ("iss", "sub", "aud", "client_id", "scope", "tenant")}
    say(caller.name, f"token: typ={header.get('typ')} alg={header.get('alg')} expires_in={token.expires_in} "
        f"refresh_token={'yes' if token.refresh_token else 'no'}")
    say(caller.name, f"    claims {json.dumps(shown)}, exp-iat={claims['exp'] - claims['iat']} s")


async def run(caller: Caller, url: str, issuer: str) -> None:
    print(flush=True)
    say(caller.name, f"== {caller.name}: " + (
        f"client credentials ({caller.auth})" if caller.secret else "authorization code + PKCE, dynamic registration"))
    storage = Memory()
    auth, browser = provider_for(caller, url, issuer, storage)
    transcript = Transcript(caller.name)
    started = time.monotonic()
    refused: int | None = None  # where in the transcript the step-up meant to fail began
    try:
        async with httpx2.AsyncClient(auth=auth, event_hooks=transcript.hooks(), timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    say(caller.name, f"initialized: {init.server_info.name}, protocol {init.protocol_version} "
                        f"({time.monotonic() - started:.2f} s with discovery and token)")
                    check(storage.tokens is not None, f"{caller.name}: no token stored")
                    await show_token(caller, storage.tokens, url, issuer, caller.first_scope)
                    # the order of discovery: the MCP request, the resource metadata, the AS metadata
                    methods = [(m, urlparse(u).path) for m, u, _ in transcript.seen]
                    check(methods[0] == ("POST", urlparse(url).path) and transcript.seen[0][2] == 401,
                          f"{caller.name}: the first request was not answered 401: {transcript.seen[:1]}")

                    names = {tool.name for tool in (await session.list_tools()).tools}
                    say(caller.name, f"tools/list: {sorted(names)}")
                    check(names == caller.tools, f"{caller.name}: tools {sorted(names)}, expected {sorted(caller.tools)}")
                    for name, arguments, expected in caller.calls:
                        result = await session.call_tool(name, arguments)
                        text = result.content[0].text if result.content else ""
                        say(caller.name, f"tools/call {name} -> {text!r}")
                        check(not result.is_error and expected in text, f"{caller.name}: {name} answered {result}")
                    for name in caller.hidden:
                        try:
                            await session.call_tool(name, {})
                            check(False, f"{caller.name}: {name} is not listed yet answered")
                        except MCPError as error:
                            say(caller.name, f"tools/call {name} (not listed) -> error {error.error.code} {error.error.message!r}")
                            check(error.error.code == -32602, f"{caller.name}: {name}: code {error.error.code}")

                    name, arguments, expected = STEP_UP_TOOL
                    say(caller.name, f"step-up: tools/call {name}, which needs {STEP_UP_SCOPE}")
                    before = len(transcript.seen)
                    if caller.steps_up:
                        result = await session.call_tool(name, arguments)
                        text = result.content[0].text if result.content else ""
                        say(caller.name, f"tools/call {name} -> {text!r}")
                        check(not result.is_error and expected in text, f"{caller.name}: {name} answered {result}")
                        await show_token(caller, storage.tokens, url, issuer, caller.first_scope | {STEP_UP_SCOPE})
                        again = [(m, urlparse(u).path, s) for m, u, s in transcript.seen[before:]]
                        say(caller.name, f"step-up requests: {again}")
                        check(again[0][2] == 403 and again[-1][2] == 200, f"{caller.name}: step-up went {again}")
                    else:
                        # The SDK asks the issuer for the union of the scopes it had and the
                        # one challenged; the issuer refuses it (invalid_scope), and the SDK
                        # raises OAuthTokenError out of the POST's task: the transport's task
                        # group ends, with the session, and the error comes out of
                        # streamable_http_client (below).
                        refused = before
                        await session.call_tool(name, arguments)
                        check(False, f"{caller.name}: {name} answered without {STEP_UP_SCOPE}")
    except BaseExceptionGroup as group:
        tokens = group.subgroup(OAuthTokenError)
        if tokens is None or refused is None:
            raise
        error = tokens
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        say(caller.name, f"tools/call {name} -> the session ended: {type(error).__name__}: {error}")
        again = [(m, urlparse(u).path, s) for m, u, s in transcript.seen[refused:]]
        say(caller.name, f"step-up requests: {again}")
        check("invalid_scope" in str(error), f"{caller.name}: the issuer refused the step-up otherwise: {error}")
        check([s for _, _, s in again] == [403, 400], f"{caller.name}: step-up went {again}")
    if browser is not None:
        await browser.client.aclose()
    say(caller.name, f"done in {time.monotonic() - started:.2f} s")


async def made_up_token(url: str) -> None:
    """A bearer token no issuer made (opaque: the server introspects it, and the issuer
    says it is not active) is refused 401 with an `invalid_token` challenge."""
    who = "random"
    print(flush=True)
    say(who, "== a made-up bearer token")
    token = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "python_oauth", "version": "0"}}}
    transcript = Transcript(who)
    async with httpx2.AsyncClient(event_hooks=transcript.hooks(), timeout=10) as http:
        response = await http.post(url, json=initialize, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"})
    challenge = response.headers.get("www-authenticate", "")
    check(response.status_code == 401, f"a made-up token was answered {response.status_code}")
    check('error="invalid_token"' in challenge, f"a made-up token's challenge: {challenge!r}")
    say(who, "refused: 401 invalid_token")


class TokenErrors(logging.Handler):
    """The SDK logs an OAuth flow's failure ("OAuth flow error") before raising it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        self.seen.append(text)


async def main(url: str, issuer: str) -> None:
    errors = TokenErrors()
    logging.getLogger("mcp").addHandler(errors)
    logging.getLogger("mcp").propagate = False
    print(f"python oauth: {url}, issuer {issuer}")
    for caller in EXPECTED:
        seen = len(errors.seen)
        await run(caller, url, issuer)
        for text in errors.seen[seen:]:
            say(caller.name, f"SDK logged: {text.splitlines()[0]}")
        if caller.steps_up:
            check(len(errors.seen) == seen, f"{caller.name}: the SDK logged {errors.seen[seen:]}")
    await made_up_token(url)
    print()
    print("python oauth: every caller as expected")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python_oauth.py <mcp-url> [<issuer>]")
    issuer = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("TOOLGRAFT_OIDC_ISSUER")
    if not issuer:
        sys.exit("python_oauth.py: no issuer (second argument or TOOLGRAFT_OIDC_ISSUER)")
    asyncio.run(main(sys.argv[1], issuer))

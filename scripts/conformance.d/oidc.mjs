// A real OAuth 2.1 / OpenID Connect authorization server for the tests of an MCP
// server acting as a resource server: the certified `oidc-provider` (npm, pinned in
// package.json beside this file), configured as an MCP client expects to find one.
//
// Usage: TOOLGRAFT_NODE_MODULES=$SUITE_DIR/node_modules node oidc.mjs <port> <resource-url>...
//
//   <port>          0 for a free one; the issuer is http://127.0.0.1:<port>
//   <resource-url>  the MCP endpoint whose access tokens this issuer mints (RFC 8707
//                   resource indicator = the JWT's `aud`); the first is the default
//                   resource for a client that names none. One ending in `*` is a
//                   prefix (`http://127.0.0.1:*` accepts any loopback port), for a
//                   server whose URL is known only after the issuer's.
//
// Prints `ready <issuer>` on stdout once listening; logs each request to stderr;
// stops on SIGTERM or SIGINT.
//
// What it serves, for the tests:
//   - discovery: RFC 8414's /.well-known/oauth-authorization-server (what MCP clients
//     ask first) and /.well-known/openid-configuration, one document (oidc-provider 9
//     serves both); keys at /jwks (RS256, made at start, never kept);
//   - access tokens for a resource as JWTs signed RS256: `aud` the resource, `scope`
//     the granted scopes among tools:read notes:write admin, `client_id`, `sub` (the
//     client id for client credentials, the account for a user), `tenant`; 10 minutes;
//   - client credentials for the pre-registered confidential clients below, each
//     limited to its own scopes (asking for another is `invalid_scope`); a resource
//     not among those given is `invalid_target`; with no resource asked for and no
//     default, the token is opaque with no `aud`;
//   - dynamic client registration (open, no initial access token; the client's
//     `scope` is dropped, see below) and the authorization code flow with PKCE, its
//     login and consent answered by oidc-provider's development forms (any login,
//     any password: a script posts them, see python_oauth.py);
//   - introspection (RFC 7662) for the client `toolgraft-rs` only, and the client
//     `alice-opaque`, alice's twin whose access tokens are opaque (`sub` alice,
//     tenant acme), to introspect;
//   - revocation.
//
// Clients (secret; method; scopes allowed; tenant): alice (alice-secret; basic;
// tools:read notes:write; acme), bob (bob-secret; post; tools:read; globex),
// alice-opaque (alice-opaque-secret; basic; as alice, sub alice), toolgraft-rs
// (toolgraft-rs-secret; basic; introspection only). oidc-provider takes either
// secret method from any of them. Users: carol (acme), dave (globex).
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// oidc-provider from the node_modules that scripts/setup installed (named by
// TOOLGRAFT_NODE_MODULES: this file is not beside it), else the usual resolution.
const modules = process.env.TOOLGRAFT_NODE_MODULES;
const { default: Provider, errors } = await import(
    modules ? pathToFileURL(join(modules, 'oidc-provider', 'lib', 'index.js')).href : 'oidc-provider'
);

const [portArg, ...resources] = process.argv.slice(2);
if (portArg === undefined || resources.length === 0) {
    console.error('usage: node oidc.mjs <port> <resource-url>...');
    process.exit(2);
}

// The clients, their secrets and what each may have. Fixed: the tests name them.
const CLIENTS = {
    alice: { secret: 'alice-secret', auth: 'client_secret_basic', scope: 'tools:read notes:write', tenant: 'acme' },
    bob: { secret: 'bob-secret', auth: 'client_secret_post', scope: 'tools:read', tenant: 'globex' },
    // Alice again, through another client: her tokens are opaque (only introspection
    // says whose they are), and name her, `sub` alice, as her own client's do.
    'alice-opaque': { secret: 'alice-opaque-secret', auth: 'client_secret_basic', scope: 'tools:read notes:write', tenant: 'acme', opaque: true, subject: 'alice' },
};
// The client a resource server introspects with.
const INTROSPECTOR = { id: 'toolgraft-rs', secret: 'toolgraft-rs-secret' };
// Users who log in through the authorization code flow, and their tenants.
const USERS = { carol: 'acme', dave: 'globex' };
const RESOURCE_SCOPES = 'tools:read notes:write admin';
const TTL = 600;

function resourceAllowed(indicator) {
    return resources.some((r) => (r.endsWith('*') ? indicator.startsWith(r.slice(0, -1)) : indicator === r));
}
const defaultResource = resources.find((r) => !r.endsWith('*'));

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };

const server = createServer();
await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(portArg), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const configuration = {
    clients: [
        ...Object.entries(CLIENTS).map(([id, c]) => ({
            client_id: id,
            client_secret: c.secret,
            token_endpoint_auth_method: c.auth,
            grant_types: ['client_credentials'],
            response_types: [],
            redirect_uris: [],
            scope: c.scope,
        })),
        {
            client_id: INTROSPECTOR.id,
            client_secret: INTROSPECTOR.secret,
            token_endpoint_auth_method: 'client_secret_basic',
            grant_types: [],
            response_types: [],
            redirect_uris: [],
        },
    ],
    jwks: { keys: [signingKey] },
    // Every scope here is checked against a client's `scope` allow-list (oidc-provider
    // only checks the scopes it knows statically).
    scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES.split(' ')],
    claims: { openid: ['sub'] },
    async findAccount(ctx, id) {
        return { accountId: id, async claims() { return { sub: id }; } };
    },
    features: {
        devInteractions: { enabled: true },
        clientCredentials: { enabled: true },
        registration: { enabled: true },
        revocation: { enabled: true },
        introspection: {
            enabled: true,
            async allowedPolicy(ctx, client) {
                return client.clientId === INTROSPECTOR.id;
            },
        },
        resourceIndicators: {
            enabled: true,
            async defaultResource(ctx, client, oneOf) {
                return oneOf ?? defaultResource;
            },
            async useGrantedResource() {
                return true;
            },
            async getResourceServerInfo(ctx, indicator, client) {
                if (!resourceAllowed(indicator)) {
                    throw new errors.InvalidTarget(`unknown resource ${indicator}`);
                }
                const opaque = CLIENTS[client.clientId]?.opaque === true;
                return {
                    scope: RESOURCE_SCOPES,
                    audience: indicator,
                    accessTokenTTL: TTL,
                    accessTokenFormat: opaque ? 'opaque' : 'jwt',
                    jwt: { sign: { alg: 'RS256' } },
                };
            },
        },
    },
    // `tenant` on every access token. And `sub` on a client's own token: the client
    // id (a JWT has it anyway, but introspection gives `sub` only for an account),
    // or the subject it stands for (`alice-opaque`: alice).
    async extraTokenClaims(ctx, token) {
        if (token.accountId) {
            const tenant = USERS[token.accountId];
            return tenant ? { tenant } : undefined;
        }
        const client = CLIENTS[token.clientId];
        const tenant = client?.tenant;
        return { sub: client?.subject ?? token.clientId, ...(tenant ? { tenant } : {}) };
    },
    ttl: {
        AccessToken: TTL,
        ClientCredentials: TTL,
        AuthorizationCode: 60,
        IdToken: TTL,
        RefreshToken: 24 * 3600,
        Grant: 24 * 3600,
        Session: 24 * 3600,
        Interaction: 600,
    },
    cookies: { keys: [randomUUID()] },
};

const provider = new Provider(issuer, configuration);

// A dynamically registered client gets no scope allow-list (RFC 7591 lets the server
// replace what a client asks for): the user's consent decides. The MCP SDKs register
// with the scope the first challenge named, and then step up to scopes beyond it with
// the same registration, which oidc-provider would refuse (invalid_scope). Reading the
// body here makes oidc-provider warn once that it was parsed upstream.
provider.use(async (ctx, next) => {
    if (ctx.method === 'POST' && ctx.path === '/reg' && ctx.is('application/json')) {
        const chunks = [];
        for await (const chunk of ctx.req) {
            chunks.push(chunk);
        }
        const metadata = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
        delete metadata.scope;
        ctx.req.body = JSON.stringify(metadata);
    }
    await next();
});
provider.use(async (ctx, next) => {
    const started = performance.now();
    await next();
    console.error(`oidc: ${ctx.method} ${ctx.originalUrl.split('?')[0]} ${ctx.status} (${(performance.now() - started).toFixed(1)} ms)`);
});
for (const event of ['server_error', 'grant.error', 'authorization.error', 'registration_create.error', 'introspection.error']) {
    provider.on(event, (ctx, error) => {
        console.error(`oidc: ${event}: ${error.error ?? error.name}: ${error.error_description ?? error.message}`);
    });
}

server.on('request', provider.callback());

function stop() {
    server.close(() => process.exit(0));
    server.closeAllConnections();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

console.log(`ready ${issuer}`);

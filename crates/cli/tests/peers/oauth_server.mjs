// An OAuth 2.1 authorization server and an MCP server it protects, for the tests of
// Corral's OAuth support for remote MCP servers. The authorization server is a real
// one, oidc-provider (installed by scripts/install-peers.sh into .peers/oauth); the
// MCP server is the TypeScript SDK 2.x (.peers/ts-server), served statelessly like
// ts_http_server.mjs's `stateless` mode, behind a bearer-token check that looks the
// token up in the authorization server's own store.
//
// Usage: node oauth_server.mjs <.peers dir> [--access-ttl SECONDS] [--insufficient-scope]
//          [--no-rfc8414] [--granted-resource] [--basic]
// (Node 20 needs no flag; oidc-provider 9.x prints "Unsupported runtime" on stderr
// there, and works.)
//
// Two loopback ports, both picked by the OS:
//   http://127.0.0.1:A          the authorization server (the issuer): discovery at
//     /.well-known/oauth-authorization-server and /.well-known/openid-configuration,
//     /auth (PKCE S256 required), /token, /reg (open dynamic client registration,
//     RFC 7591), /token/revocation, /jwks, and the development login and consent
//     pages under /interaction/ (see oauth_login.mjs, which goes through them).
//     Scopes: openid, offline_access, mcp:tools (+ mcp:admin with --insufficient-scope).
//     The only resource indicator (RFC 8707) it accepts is the MCP URL; its access
//     tokens are opaque, with that URL as audience. A refresh token is issued when the
//     scope has offline_access (and the authorization request has no `prompt`, or one
//     that includes consent); refresh tokens rotate, and presenting a used one revokes
//     the whole grant (invalid_grant).
//   http://127.0.0.1:B/mcp      the MCP server. Without a valid token it answers 401
//     with WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:B/.well-known/
//     oauth-protected-resource/mcp", scope="mcp:tools" (and error="invalid_token" when
//     a token was presented: unknown, expired, revoked, or not for this audience).
//     Its protected resource metadata (RFC 9728) is at that address and at
//     /.well-known/oauth-protected-resource.
//     Tools: `whoami {}` returns the JSON text {"scope", "client_id", "sub",
//     "accepted_tokens"} (sub: the login given on the sign-in page)
//     (accepted_tokens: how many distinct access tokens this resource has accepted so
//     far), `echo {text}` returns text.
//
// Options:
//   --access-ttl SECONDS  lifetime of access tokens (default 3600)
//   --insufficient-scope  adds scope mcp:admin and a tool `admin {}`: a POST carrying
//                         tools/call admin with a token lacking mcp:admin is answered
//                         HTTP 403, WWW-Authenticate: Bearer error="insufficient_scope",
//                         scope="mcp:tools mcp:admin", resource_metadata="…"
//   --no-rfc8414          /.well-known/oauth-authorization-server is a 404 (clients must
//                         fall back to /.well-known/openid-configuration)
//   --granted-resource    oidc-provider's own answer to a token request without
//                         `resource` (authorization_code or refresh_token): a token for
//                         the resource granted at authorization when the scope has no
//                         openid. By default such a token has no audience (the MCP
//                         server rejects it), as it would for a scope with openid.
//   --basic               /mcp always answers 401 WWW-Authenticate: Basic realm="x" (not
//                         OAuth), and there is no protected resource metadata
//
// Control API, on the MCP server's port, under /_peer:
//   GET  /_peer/log         JSON array, one entry per request the authorization server
//                           got at its authorization, token, registration and
//                           revocation endpoints ("authorization", "token",
//                           "registration", "revocation"; and "authorization_resume"
//                           for GET /auth/UID, where the browser comes back after each
//                           login or consent step, whose `error` is e.g. access_denied
//                           after a cancel): {endpoint, method, grant_type,
//                           params: {NAME: how many times it was sent}, resource: [the
//                           resource values], refresh_token_hash (sha256 hex of the
//                           refresh_token presented, first 12), issued_refresh_token_hash
//                           (same, of the one returned), status, error, and
//                           audience_removed: true for a token request without
//                           `resource` whose token was made audience-less}
//   POST /_peer/revoke-all  revokes every grant with its tokens (the next refresh gets
//                           invalid_grant, every access token 401s); answers {revoked}
//   POST /_peer/drop-access-tokens  forgets every access token, as an expiry would
//                           (the grants and refresh tokens stay): every client's next
//                           request gets 401 invalid_token at once; answers {dropped}
//   GET  /_peer/stats       {registrations (successful), token_requests, refresh_requests,
//                           accepted_tokens (distinct), rejected_tokens (requests with a
//                           bad token), insufficient_scope (403s)}
//
// Once both ports listen it prints exactly one line on stdout,
//   {"issuer": "http://127.0.0.1:A", "mcp_url": "http://127.0.0.1:B/mcp",
//    "control": "http://127.0.0.1:B/_peer"}
// and logs only to stderr after that; it serves until killed.
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// oidc-provider prints its notices with console.info, i.e. on stdout: keep stdout for
// the one JSON line.
console.log = console.info = (...args) => console.error(...args);

const args = process.argv.slice(2);
const peers = args[0] && path.resolve(args[0]);
if (!peers) {
  console.error(
    'usage: node oauth_server.mjs <.peers dir> [--access-ttl S] [--insufficient-scope] [--no-rfc8414] [--granted-resource] [--basic]'
  );
  process.exit(2);
}
const flag = (name) => args.includes(name);
const ttlArg = args.indexOf('--access-ttl');
const accessTtl = ttlArg > 0 ? Number(args[ttlArg + 1]) : 3600;
const insufficientScope = flag('--insufficient-scope');
const noRfc8414 = flag('--no-rfc8414');
const grantedResource = flag('--granted-resource');
const basic = flag('--basic');

// oidc-provider is ESM only: import it by file URL from .peers/oauth; the MCP SDK
// the way ts_http_server.mjs loads it.
const oauthReq = createRequire(path.join(peers, 'oauth', 'package.json'));
const oidcMain = path.join(path.dirname(oauthReq.resolve('oidc-provider/package.json')), 'lib', 'index.js');
const { default: Provider, errors: oidcErrors } = await import(pathToFileURL(oidcMain).href);
const sdkReq = createRequire(path.join(peers, 'ts-server', 'package.json'));
const { McpServer, createMcpHandler } = sdkReq('@modelcontextprotocol/server');
const z = sdkReq('zod');

const hash12 = (s) => createHash('sha256').update(String(s)).digest('hex').slice(0, 12);

// Both ports first: the issuer and the resource are URLs with the OS-picked ports in them.
const listen = (srv) => new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv.address().port)));
const asServer = http.createServer();
const rsServer = http.createServer();
const issuer = `http://127.0.0.1:${await listen(asServer)}`;
const rsBase = `http://127.0.0.1:${await listen(rsServer)}`;
const mcpUrl = `${rsBase}/mcp`;
const metadataUrl = `${rsBase}/.well-known/oauth-protected-resource/mcp`;
const resourceScope = insufficientScope ? 'mcp:tools mcp:admin' : 'mcp:tools';

// ---- The authorization server's store: in memory, enumerable (for revoke-all). ----
// Entries never expire here: oidc-provider checks every artifact's `exp` itself.
const store = new Map(); // `${model}:${id}` -> payload
class MemoryAdapter {
  constructor(model) {
    this.model = model;
  }
  key(id) {
    return `${this.model}:${id}`;
  }
  async upsert(id, payload) {
    store.set(this.key(id), payload);
  }
  async find(id) {
    return store.get(this.key(id));
  }
  async findByUid(uid) {
    for (const [k, v] of store) if (k.startsWith(`${this.model}:`) && v.uid === uid) return v;
    return undefined;
  }
  async findByUserCode(userCode) {
    for (const [k, v] of store) if (k.startsWith(`${this.model}:`) && v.userCode === userCode) return v;
    return undefined;
  }
  async consume(id) {
    const v = store.get(this.key(id));
    if (v) v.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id) {
    store.delete(this.key(id));
  }
  async revokeByGrantId(grantId) {
    for (const [k, v] of store) if (k.startsWith(`${this.model}:`) && v.grantId === grantId) store.delete(k);
  }
}

const provider = new Provider(issuer, {
  adapter: MemoryAdapter,
  clients: [],
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'mcp:tools', ...(insufficientScope ? ['mcp:admin'] : [])],
  clientBasedCORS: () => true,
  // Errors that cannot be redirected to the client (e.g. a redirect_uri it did not
  // register) as a small page naming the error, which the log records too.
  renderError: (ctx, out) => {
    ctx.state.peerError = out.error;
    ctx.type = 'html';
    const text = JSON.stringify(out).replace(/[&<>]/g, (c) => `&#${c.charCodeAt(0)};`);
    ctx.body = `<!doctype html><html><body><h1>oauth error</h1><pre>${text}</pre></body></html>`;
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true }, // open: no initial access token
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No resource parameter: no default resource, and not the granted one unless
      // oidc-provider has nothing else to issue (see --granted-resource).
      defaultResource: () => undefined,
      useGrantedResource: () => false,
      getResourceServerInfo: (ctx, resourceIndicator) => {
        if (resourceIndicator !== mcpUrl) throw new oidcErrors.InvalidTarget();
        return {
          scope: resourceScope,
          audience: mcpUrl,
          accessTokenTTL: accessTtl,
          accessTokenFormat: 'opaque',
        };
      },
    },
  },
  rotateRefreshToken: true,
  ttl: {
    AccessToken: accessTtl,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: 14 * 24 * 3600,
    Interaction: 3600,
    Session: 14 * 24 * 3600,
    Grant: 14 * 24 * 3600,
  },
});

// ---- What the authorization server saw. ----
const log = [];
const stats = {
  registrations: 0,
  token_requests: 0,
  refresh_requests: 0,
  accepted_tokens: 0,
  rejected_tokens: 0,
  insufficient_scope: 0,
};
const LOGGED = new Set(['authorization', 'resume', 'token', 'registration', 'revocation']);

// Runs around oidc-provider's own handling; reads the parameters it parsed (a
// repeated form parameter is an array there, so counts survive).
provider.use(async (ctx, next) => {
  await next();
  const route = ctx.oidc?.route;
  if (!LOGGED.has(route)) return;
  let raw;
  if (route === 'authorization' && ctx.method === 'GET') {
    raw = {};
    for (const [k, v] of new URLSearchParams(ctx.querystring)) raw[k] = k in raw ? [].concat(raw[k], v) : v;
  } else {
    raw = ctx.oidc.body ?? {};
  }
  const params = {};
  for (const [k, v] of Object.entries(raw)) params[k] = route !== 'registration' && Array.isArray(v) ? v.length : 1;
  const body = ctx.body && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) ? ctx.body : {};
  let error = body.error ?? ctx.state.peerError;
  if (!error && ctx.status >= 300 && ctx.status < 400 && ctx.response.get('location')) {
    error = URL.parse(ctx.response.get('location'), issuer)?.searchParams.get('error') ?? undefined;
  }
  const entry = {
    endpoint: route === 'resume' ? 'authorization_resume' : route,
    method: ctx.method,
    grant_type: raw.grant_type,
    params,
    resource: raw.resource === undefined ? [] : [].concat(raw.resource),
    refresh_token_hash: raw.refresh_token ? hash12(raw.refresh_token) : undefined,
    issued_refresh_token_hash: body.refresh_token ? hash12(body.refresh_token) : undefined,
    status: ctx.status,
    error,
  };
  log.push(entry);
  // A token request without `resource`: oidc-provider issues a token for the granted
  // resource anyway when the scope has no openid (with openid, one for its userinfo
  // endpoint, without audience). Unless --granted-resource, make it audience-less in
  // both cases, so a client that forgets `resource` gets a token the MCP server rejects.
  if (route === 'token' && ctx.status === 200 && raw.resource === undefined && !grantedResource && body.access_token) {
    const stored = store.get(`AccessToken:${body.access_token}`);
    if (stored?.aud !== undefined) {
      delete stored.aud;
      entry.audience_removed = true;
    }
  }
  if (route === 'registration' && ctx.status === 201) stats.registrations += 1;
  if (route === 'token') {
    stats.token_requests += 1;
    if (raw.grant_type === 'refresh_token') stats.refresh_requests += 1;
  }
  console.error(`oauth_server: AS ${JSON.stringify(entry)}`);
});

const providerCallback = provider.callback();
asServer.on('request', (req, res) => {
  if (noRfc8414 && new URL(req.url, issuer).pathname === '/.well-known/oauth-authorization-server') {
    res.writeHead(404, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ error: 'not_found' }));
  }
  providerCallback(req, res);
});

// ---- The protected MCP server. ----
const acceptedTokens = new Set(); // hashes of the access tokens accepted so far

function factory(ctx) {
  const server = new McpServer({ name: 'oauth-peer', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.registerTool('whoami', { description: 'The token this request carried', inputSchema: z.object({}) }, async () => ({
    content: [
      {
        type: 'text',
        text: JSON.stringify({
          scope: ctx?.authInfo?.scopes?.join(' ') ?? '',
          client_id: ctx?.authInfo?.clientId,
          sub: ctx?.authInfo?.extra?.accountId,
          accepted_tokens: acceptedTokens.size,
        }),
      },
    ],
  }));
  server.registerTool(
    'echo',
    { description: 'Returns text unchanged', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] })
  );
  if (insufficientScope) {
    // The 403 for a token without mcp:admin is answered before the MCP handler runs.
    server.registerTool('admin', { description: 'Needs scope mcp:admin', inputSchema: z.object({}) }, async () => ({
      content: [{ type: 'text', text: 'admin ok' }],
    }));
  }
  return server;
}
const mcpHandler = createMcpHandler(factory);

const json = (res, status, value, headers = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(value));
};

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

// Node request (body already read) → web Request, web Response → node response.
function toWeb(nodeReq, nodeRes, body) {
  const headers = new Headers();
  for (const [k, v] of Object.entries(nodeReq.headers)) {
    if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
    else if (v !== undefined) headers.set(k, v);
  }
  const ac = new AbortController();
  nodeRes.on('close', () => {
    if (!nodeRes.writableFinished) ac.abort();
  });
  const init = { method: nodeReq.method, headers, signal: ac.signal };
  if (!['GET', 'HEAD'].includes(nodeReq.method)) init.body = body;
  return new Request(`${rsBase}${nodeReq.url}`, init);
}

async function send(webRes, nodeRes) {
  const headers = {};
  webRes.headers.forEach((v, k) => (headers[k] = v));
  nodeRes.writeHead(webRes.status, headers);
  if (!webRes.body) return nodeRes.end();
  const reader = webRes.body.getReader();
  nodeRes.on('close', () => reader.cancel().catch(() => {}));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    nodeRes.write(value);
  }
  nodeRes.end();
}

// The access token in the Authorization header, if it is one this resource accepts:
// known to the authorization server, not expired or revoked, with this audience.
async function checkToken(req) {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m) return { presented: false };
  const token = await provider.AccessToken.find(m[1]).catch(() => undefined);
  if (!token || token.isExpired || token.aud !== mcpUrl) return { presented: true };
  return { presented: true, token, value: m[1] };
}

// Whether a JSON-RPC body (a message or a batch) calls tool `name`.
function callsTool(body, name) {
  let msg;
  try {
    msg = JSON.parse(body.toString());
  } catch {
    return false;
  }
  return [].concat(msg).some((m) => m?.method === 'tools/call' && m?.params?.name === name);
}

const prm = {
  resource: mcpUrl,
  authorization_servers: [issuer],
  scopes_supported: resourceScope.split(' '),
};

async function handleResource(req, res) {
  const url = new URL(req.url, rsBase);
  const p = url.pathname;

  // Control API.
  if (p === '/_peer/log' && req.method === 'GET') return json(res, 200, log);
  if (p === '/_peer/stats' && req.method === 'GET') return json(res, 200, stats);
  if (p === '/_peer/revoke-all' && req.method === 'POST') {
    let revoked = 0;
    for (const k of [...store.keys()]) {
      const model = k.slice(0, k.indexOf(':'));
      if (['Grant', 'AccessToken', 'RefreshToken', 'AuthorizationCode'].includes(model)) {
        if (model === 'Grant') revoked += 1;
        store.delete(k);
      }
    }
    console.error(`oauth_server: revoked ${revoked} grants`);
    return json(res, 200, { revoked });
  }
  if (p === '/_peer/drop-access-tokens' && req.method === 'POST') {
    let dropped = 0;
    for (const k of [...store.keys()]) {
      if (k.startsWith('AccessToken:')) {
        dropped += 1;
        store.delete(k);
      }
    }
    console.error(`oauth_server: dropped ${dropped} access tokens`);
    return json(res, 200, { dropped });
  }

  // Protected resource metadata (RFC 9728).
  if (p === '/.well-known/oauth-protected-resource/mcp' || p === '/.well-known/oauth-protected-resource') {
    if (basic) return json(res, 404, { error: 'not_found' });
    return json(res, 200, prm);
  }

  if (p !== '/mcp') return json(res, 404, { error: 'not_found' });

  const body = await readBody(req);
  if (basic) {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="x"', 'content-type': 'text/plain' });
    return res.end('authentication required\n');
  }
  const check = await checkToken(req);
  if (!check.token) {
    if (check.presented) stats.rejected_tokens += 1;
    const error = check.presented ? 'error="invalid_token", ' : '';
    console.error(`oauth_server: RS 401 (${check.presented ? 'invalid token' : 'no token'})`);
    return json(
      res,
      401,
      { error: check.presented ? 'invalid_token' : 'unauthorized' },
      { 'www-authenticate': `Bearer ${error}resource_metadata="${metadataUrl}", scope="mcp:tools"` }
    );
  }
  const { token, value } = check;
  const scopes = (token.scope ?? '').split(' ').filter(Boolean);
  acceptedTokens.add(hash12(value));
  stats.accepted_tokens = acceptedTokens.size;
  if (insufficientScope && req.method === 'POST' && callsTool(body, 'admin') && !scopes.includes('mcp:admin')) {
    stats.insufficient_scope += 1;
    console.error('oauth_server: RS 403 insufficient_scope');
    return json(
      res,
      403,
      { error: 'insufficient_scope' },
      {
        'www-authenticate': `Bearer error="insufficient_scope", scope="mcp:tools mcp:admin", resource_metadata="${metadataUrl}"`,
      }
    );
  }
  const authInfo = {
    token: value,
    clientId: token.clientId,
    scopes,
    expiresAt: token.exp,
    resource: new URL(mcpUrl),
    extra: { accountId: token.accountId },
  };
  await send(await mcpHandler.fetch(toWeb(req, res, body), { authInfo }), res);
}

rsServer.on('request', (req, res) => {
  handleResource(req, res).catch((e) => {
    console.error(e);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});

process.stdout.write(`${JSON.stringify({ issuer, mcp_url: mcpUrl, control: `${rsBase}/_peer` })}\n`);

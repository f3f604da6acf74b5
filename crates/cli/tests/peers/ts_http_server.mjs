// A remote MCP server over Streamable HTTP, built with the TypeScript SDK 2.x
// (@modelcontextprotocol/server, installed by scripts/install-peers.sh into
// .peers/ts-server), on a loopback port the OS picks. It prints one line,
// {"url": "http://127.0.0.1:PORT/mcp"}, then serves until killed (or on a fixed
// --port, to come back on the same address after a kill).
//
// Usage: node ts_http_server.mjs <dir holding node_modules> <mode> [--port N]
//          [--tls CERT.pem KEY.pem]   (HTTPS with that certificate)
//   modern    createMcpHandler(factory, {legacy: 'reject'}): MCP 2026-07-28 only
//   stateless createMcpHandler(factory): 2026-07-28, and 2025 requests served statelessly
//   session   WebStandardStreamableHTTPServerTransport with session ids (2025 sessions);
//             POST /expire ends every session (their next request gets 404)
// Other paths, for failures: /loop redirects to itself, /page is a 200 HTML page, any
// other path is a 404 HTML page.
//
// Tools: `shout {text}` (upper-cases it), `echo {text}` (returns it), `slow {ms}` (answers after ms, with a progress
// notification first when the request has a progress token; cancellable), `cancelled {}`
// (how many slow calls were cancelled), `count {}` (how many tools/call this process
// served). Resource `peer://greeting`; prompt `welcome {name}`.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { randomUUID } from 'node:crypto';

const [dir, mode] = process.argv.slice(2);
const portArg = process.argv.indexOf('--port');
const fixedPort = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;
const tlsArg = process.argv.indexOf('--tls');
const tls =
  tlsArg > 0
    ? { cert: fs.readFileSync(process.argv[tlsArg + 1]), key: fs.readFileSync(process.argv[tlsArg + 2]) }
    : null;
const req = createRequire(path.join(dir, 'package.json'));
const { McpServer, createMcpHandler, WebStandardStreamableHTTPServerTransport } =
  req('@modelcontextprotocol/server');
const z = req('zod');

let calls = 0;
let cancelled = 0;
function factory() {
  const server = new McpServer({ name: `ts-http-${mode}`, version: '1.0.0' }, { capabilities: { tools: {} } });
  server.registerTool(
    'shout',
    { description: 'Upper-cases text', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => {
      calls += 1;
      return { content: [{ type: 'text', text: text.toUpperCase() }] };
    }
  );
  server.registerTool(
    'echo',
    { description: 'Returns text unchanged', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => {
      calls += 1;
      return { content: [{ type: 'text', text }] };
    }
  );
  server.registerTool(
    'slow',
    { description: 'Answers after ms milliseconds', inputSchema: z.object({ ms: z.number() }) },
    async ({ ms }, ctx) => {
      calls += 1;
      const token = ctx?.mcpReq?._meta?.progressToken;
      if (token !== undefined && ctx.mcpReq.notify) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
      }
      const signal = ctx?.mcpReq?.signal;
      const aborted = await new Promise((resolve) => {
        const t = setTimeout(() => resolve(false), ms);
        signal?.addEventListener('abort', () => {
          clearTimeout(t);
          resolve(true);
        });
      });
      if (aborted) cancelled += 1;
      return { content: [{ type: 'text', text: aborted ? 'cancelled' : `slept ${ms}` }] };
    }
  );
  server.registerTool('cancelled', { description: 'Calls of slow cancelled', inputSchema: z.object({}) }, async () => ({
    content: [{ type: 'text', text: String(cancelled) }],
  }));
  server.registerResource(
    'greeting',
    'peer://greeting',
    { description: 'A fixed text', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello from the peer' }] })
  );
  server.registerPrompt(
    'welcome',
    { description: 'Welcomes someone', argsSchema: z.object({ name: z.string() }) },
    async ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Welcome, ${name}!` } }] })
  );
  server.registerTool('count', { description: 'Calls served', inputSchema: z.object({}) }, async () => {
    calls += 1;
    return { content: [{ type: 'text', text: String(calls) }] };
  });
  return server;
}

// Node request → web Request, web Response → node response (streamed).
// A client that hangs up aborts the request (how a 2026-07-28 request is cancelled).
async function toWeb(nodeReq, nodeRes) {
  const chunks = [];
  for await (const c of nodeReq) chunks.push(c);
  const body = Buffer.concat(chunks);
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
  return new Request(`http://${nodeReq.headers.host}${nodeReq.url}`, init);
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

let serve;
if (mode === 'session') {
  const sessions = new Map();
  serve = async (request) => {
    const url = new URL(request.url);
    if (url.pathname === '/expire') {
      for (const t of sessions.values()) await t.close().catch(() => {});
      sessions.clear();
      return new Response('expired\n');
    }
    const id = request.headers.get('mcp-session-id');
    if (id) {
      const t = sessions.get(id);
      if (!t) {
        return new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }), {
          status: 404,
          headers: { 'content-type': 'application/json' },
        });
      }
      return t.handleRequest(request);
    }
    const t = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, t),
    });
    await factory().connect(t);
    return t.handleRequest(request);
  };
} else {
  const handler = createMcpHandler(factory, mode === 'modern' ? { legacy: 'reject' } : {});
  serve = (request) => handler.fetch(request);
}

const handle = async (nodeReq, nodeRes) => {
  try {
    const u = new URL(nodeReq.url, 'http://x');
    if (u.pathname === '/loop') {
      nodeRes.writeHead(302, { location: '/loop' });
      return nodeRes.end();
    }
    if (u.pathname === '/page') {
      nodeRes.writeHead(200, { 'content-type': 'text/html' });
      return nodeRes.end('<!doctype html><html><body>A web page, not MCP</body></html>');
    }
    if (u.pathname !== '/mcp' && u.pathname !== '/expire') {
      nodeRes.writeHead(404, { 'content-type': 'text/html' });
      return nodeRes.end('<html><body>Not here</body></html>');
    }
    await send(await serve(await toWeb(nodeReq, nodeRes)), nodeRes);
  } catch (e) {
    console.error(e);
    if (!nodeRes.headersSent) nodeRes.writeHead(500);
    nodeRes.end();
  }
};
const srv = tls ? https.createServer(tls, handle) : http.createServer(handle);
srv.listen(fixedPort, '127.0.0.1', () => {
  const scheme = tls ? 'https' : 'http';
  console.log(JSON.stringify({ url: `${scheme}://127.0.0.1:${srv.address().port}/mcp` }));
});

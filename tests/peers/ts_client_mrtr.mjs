// The official TypeScript client (@modelcontextprotocol/client 2.x) answering a 2026
// server's questions through Corral: it declares elicitation and sampling, registers
// handlers for both, and calls tools that ask.
//
//   node ts_client_mrtr.mjs MODE stdio CORRAL_BIN CONFIG_FILE   (corral mcp --standalone)
//   node ts_client_mrtr.mjs MODE http URL TOKEN
//
// MODE: '2026-07-28' (pinned: the client answers input_required results itself and
// retries, through Corral's pass-through) or 'legacy' (a 2025 session: Corral sends it
// ordinary elicitation/sampling requests and retries upstream). Calls TOOLS (a JSON
// array of [name, arguments]); prints one JSON object: the protocol, each call's first
// text (or its error), and the requests the handlers saw.
import { createRequire } from 'node:module';
import path from 'node:path';

const [mode, transport, a, b, tools] = process.argv.slice(2);
const peers = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.peers/tsclient/');
const require = createRequire(peers + '/');
const client = await import(require.resolve('@modelcontextprotocol/client'));
const stdio = await import(require.resolve('@modelcontextprotocol/client/stdio'));

const versionNegotiation = mode === 'legacy' ? { mode: 'legacy' } : { mode: { pin: mode } };
const c = new client.Client(
  { name: 'corral-test-ts-mrtr', version: '1.0.0' },
  { versionNegotiation, capabilities: { elicitation: {}, sampling: {} } }
);
const asked = [];
c.setRequestHandler('elicitation/create', async (request) => {
  asked.push(`elicitation: ${request.params.message}`);
  return { action: 'accept', content: { username: 'ada', email: 'ada@example.com', ok: true } };
});
c.setRequestHandler('sampling/createMessage', async (request) => {
  const last = request.params.messages.at(-1);
  asked.push(`sampling: ${last.content.text}`);
  return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled ${asked.length}` } };
});
const t = transport === 'stdio'
  ? new stdio.StdioClientTransport({ command: a, args: ['mcp', '--standalone', '-c', b] })
  : new client.StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
await c.connect(t);
const seen = { protocol: c.getNegotiatedProtocolVersion(), calls: [] };
for (const [name, args] of JSON.parse(tools)) {
  try {
    const r = await c.callTool({ name, arguments: args });
    seen.calls.push({ text: r.content?.[0]?.text ?? null, isError: r.isError ?? false });
  } catch (e) {
    seen.calls.push({ error: String(e && e.message ? e.message : e) });
  }
}
seen.asked = asked;
await c.close();
console.log(JSON.stringify(seen));
process.exit(0);

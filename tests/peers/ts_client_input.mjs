// A 2025 server's questions reaching the official TypeScript client
// (@modelcontextprotocol/client 2.x) pinned to 2026-07-28 as `input_required`, answered
// by the client's own elicitation and sampling handlers, which its driver turns into the
// retry.
//
//   node ts_client_input.mjs stdio CORRAL_BIN CONFIG_FILE   (corral mcp --standalone)
//   node ts_client_input.mjs http URL TOKEN
//
// Calls the fixture's (--conformance) test_elicitation and test_sampling. Prints one JSON
// object with what it saw; exits non-zero on failure.
import { createRequire } from 'node:module';
import path from 'node:path';

const [transport, a, b] = process.argv.slice(2);
const peers = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.peers/tsclient/');
const require = createRequire(peers + '/');
const client = await import(require.resolve('@modelcontextprotocol/client'));
const stdio = await import(require.resolve('@modelcontextprotocol/client/stdio'));

const seen = { asked: [] };
const c = new client.Client(
  { name: 'corral-test-ts-input', version: '1.0.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: {}, sampling: {} } },
);
c.setRequestHandler('elicitation/create', async (req) => {
  seen.asked.push({ method: 'elicitation/create', message: req.params.message, has_id: 'elicitationId' in req.params });
  return { action: 'accept', content: { username: 'ts-user', email: 'ts@example.com' } };
});
c.setRequestHandler('sampling/createMessage', async (req) => {
  seen.asked.push({ method: 'sampling/createMessage', text: req.params.messages[0].content.text });
  return { role: 'assistant', content: { type: 'text', text: 'sampled by ts' }, model: 'ts-model', stopReason: 'endTurn' };
});
const t = transport === 'stdio'
  ? new stdio.StdioClientTransport({ command: a, args: ['mcp', '--standalone', '-c', b] })
  : new client.StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
await c.connect(t);
seen.protocol = c.getNegotiatedProtocolVersion();
const e = await c.callTool({ name: 'fx__test_elicitation', arguments: { message: 'who are you?' } });
seen.elicitation = { text: e.content[0].text, isError: e.isError ?? false };
const s = await c.callTool({ name: 'fx__test_sampling', arguments: { prompt: 'say hi' } });
seen.sampling = { text: s.content[0].text, isError: s.isError ?? false };
await c.close();
console.log(JSON.stringify(seen));
process.exit(0);

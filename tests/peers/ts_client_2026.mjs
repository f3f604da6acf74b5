// Drives Corral with the official TypeScript client (@modelcontextprotocol/client 2.x).
//
//   node ts_client_2026.mjs MODE stdio CORRAL_BIN CONFIG_FILE   (corral mcp --standalone)
//   node ts_client_2026.mjs MODE http URL TOKEN
//
// MODE: '2026-07-28' (versionNegotiation {pin}), 'auto' or 'legacy'. Lists and calls a
// tool of the fixture, reads a resource and gets a prompt of server-everything. Prints
// one JSON object with what it saw; exits non-zero on failure.
import { createRequire } from 'node:module';
import path from 'node:path';

const [mode, transport, a, b] = process.argv.slice(2);
// The client is installed in .peers/tsclient (scripts/install-peers.sh).
const peers = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.peers/tsclient/');
const require = createRequire(peers + '/');
const client = await import(require.resolve('@modelcontextprotocol/client'));
const stdio = await import(require.resolve('@modelcontextprotocol/client/stdio'));

const versionNegotiation = mode === 'legacy' ? { mode: 'legacy' } : mode === 'auto' ? { mode: 'auto' } : { mode: { pin: mode } };
const c = new client.Client({ name: 'corral-test-ts', version: '1.0.0' }, { versionNegotiation });
const t = transport === 'stdio'
  ? new stdio.StdioClientTransport({ command: a, args: ['mcp', '--standalone', '-c', b] })
  : new client.StreamableHTTPClientTransport(new URL(a), { requestInit: { headers: { Authorization: `Bearer ${b}` } } });
await c.connect(t);
const seen = { protocol: c.getNegotiatedProtocolVersion() };
seen.tools = (await c.listTools()).tools.map((x) => x.name);
const r = await c.callTool({ name: 'fx__echo', arguments: { text: 'from ts 2026' } });
seen.echo = r.content[0].text;
const resources = (await c.listResources()).resources;
seen.resources = resources.length;
seen.read = (await c.readResource({ uri: resources[0].uri })).contents.length;
const prompts = (await c.listPrompts()).prompts;
const plain = prompts.find((p) => !(p.arguments || []).some((x) => x.required));
seen.prompt = plain.name;
seen.prompt_messages = (await c.getPrompt({ name: plain.name })).messages.length;
await c.close();
console.log(JSON.stringify(seen));
process.exit(0);

// A TypeScript client 2.x pinned to MCP 2026-07-28 opens a subscriptions/listen through
// Corral (`client.listen`), calls a tool that changes the server's tool list, and waits
// for the list change on its listen; then ends the listen.
//
//   node ts_listen_2026.mjs CORRAL_BIN CONFIG_FILE TOOL
//
// Prints one JSON object with what it saw; exits non-zero on failure or after 60 s.
import { createRequire } from 'node:module';
import path from 'node:path';

const [corral, config, tool] = process.argv.slice(2);
const peers = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.peers/tsclient/');
const require = createRequire(peers + '/');
const client = await import(require.resolve('@modelcontextprotocol/client'));
const stdio = await import(require.resolve('@modelcontextprotocol/client/stdio'));

setTimeout(() => {
  console.error('timed out waiting for notifications/tools/list_changed on the listen');
  process.exit(2);
}, 60000).unref();

const c = new client.Client(
  { name: 'corral-test-ts-listen', version: '1.0.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
// Each list change wakes the waiter; the first ones may be servers becoming ready.
const notes = [];
let wake = () => {};
c.setNotificationHandler('notifications/tools/list_changed', (n) => { notes.push(n); wake(); });
const beyond = (n) => new Promise((resolve) => {
  const check = () => (notes.length > n ? resolve() : (wake = check));
  check();
});
await c.connect(new stdio.StdioClientTransport({ command: corral, args: ['mcp', '--standalone', '-c', config] }));
const seen = { protocol: c.getNegotiatedProtocolVersion() };
const sub = await c.listen({ toolsListChanged: true });
seen.honored = sub.honoredFilter;
const before = (await c.listTools()).tools.map((t) => t.name);
const heard = notes.length;
await c.callTool({ name: tool, arguments: {} });
// Until a list change heard after the call shows a tool that was not there before.
let added = [];
let counted = heard;
while (added.length === 0) {
  await beyond(counted);
  counted = notes.length;
  const after = (await c.listTools()).tools.map((t) => t.name);
  added = after.filter((t) => !before.includes(t));
}
const note = notes[notes.length - 1];
seen.notification = note.method;
seen.subscription = note.params?._meta?.['io.modelcontextprotocol/subscriptionId'] ?? null;
seen.added = added;
await sub.close();
seen.closed = await sub.closed;
await c.close();
console.log(JSON.stringify(seen));
process.exit(0);

// A stdio MCP server that speaks only 2026-07-28, built with the TypeScript SDK 2.x
// (@modelcontextprotocol/server, installed by scripts/install-peers.sh into
// .peers/ts-server): `serveStdio(factory, {legacy: 'reject'})` refuses `initialize`
// with -32022. Tools: `shout {text}` (upper-cases it) and `confirm {}`, which asks the
// 2026 way: an input_required result with an elicitation, then, on the retry with the
// answer, "confirmed: <answer>" (or "not confirmed" when declined); `where {}` asks for
// the client's roots the same way and answers "roots: <uris>".
// Usage: node ts_modern_server.cjs <dir holding node_modules>
const path = require('node:path');
const { createRequire } = require('node:module');
const req = createRequire(path.join(process.argv[2], 'package.json'));
const { McpServer, inputRequired, inputResponse } = req('@modelcontextprotocol/server');
const { serveStdio } = req('@modelcontextprotocol/server/stdio');
const z = req('zod');

serveStdio(
  () => {
    const server = new McpServer(
      { name: 'ts-modern', version: '1.0.0' },
      { capabilities: { tools: {} } }
    );
    server.registerTool(
      'shout',
      { description: 'Upper-cases text', inputSchema: z.object({ text: z.string() }) },
      async ({ text }) => ({ content: [{ type: 'text', text: text.toUpperCase() }] })
    );
    server.registerTool(
      'confirm',
      { description: 'Asks the user first', inputSchema: z.object({}) },
      async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'ok');
        if (answer.kind === 'elicit') {
          const text = answer.action === 'accept' ? `confirmed: ${answer.content.ok}` : 'not confirmed';
          return { content: [{ type: 'text', text }] };
        }
        return inputRequired({
          inputRequests: {
            ok: inputRequired.elicit({
              message: 'Go ahead?',
              requestedSchema: z.object({ ok: z.boolean() }),
            }),
          },
        });
      }
    );
    server.registerTool(
      'where',
      { description: "Lists the client's roots", inputSchema: z.object({}) },
      async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'roots');
        if (answer.kind === 'roots') {
          return { content: [{ type: 'text', text: `roots: ${answer.roots.map((r) => r.uri).join(' ')}` }] };
        }
        return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
      }
    );
    return server;
  },
  { legacy: 'reject' }
);

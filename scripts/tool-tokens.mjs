#!/usr/bin/env node
// Measures what tool definitions cost in tokens, to check the estimate of
// `corral tools --tokens` (bytes of JSON / BYTES_PER_TOKEN in crates/cli/src/commands/tools.rs).
//
//   npm install --prefix /tmp/tokenizers gpt-tokenizer @anthropic-ai/tokenizer
//   corral tools --json | NODE_PATH=/tmp/tokenizers/node_modules node scripts/tool-tokens.mjs
//
// Reads the JSON array `corral tools --json` prints, and prints per tool: its definition's
// bytes (as tools/list sends it: without the `server`, `tool` and `builtin` fields listings
// add), its tokens under OpenAI's cl100k_base and o200k_base and under Anthropic's public
// (Claude 2) tokenizer, then the totals and the bytes-per-token ratio of each.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(import.meta.url);
const cl100k = require("gpt-tokenizer/encoding/cl100k_base");
const o200k = require("gpt-tokenizer/encoding/o200k_base");
const claude = require("@anthropic-ai/tokenizer");

const tools = JSON.parse(readFileSync(0, "utf8"));
const rows = tools.map((t) => {
  const { server, tool, builtin, ...def } = t;
  const text = JSON.stringify(def);
  return {
    name: t.name,
    bytes: Buffer.byteLength(text),
    cl100k: cl100k.encode(text).length,
    o200k: o200k.encode(text).length,
    claude: claude.countTokens(text),
  };
});
const sum = (k) => rows.reduce((n, r) => n + r[k], 0);
for (const r of rows) {
  console.log(
    [r.name.padEnd(36), r.bytes, r.cl100k, r.o200k, r.claude].join("\t"),
  );
}
const bytes = sum("bytes");
console.log(
  ["total".padEnd(36), bytes, sum("cl100k"), sum("o200k"), sum("claude")].join("\t"),
);
for (const k of ["cl100k", "o200k", "claude"]) {
  console.log(`${k}: ${(bytes / sum(k)).toFixed(2)} bytes per token`);
}

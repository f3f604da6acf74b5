#!/usr/bin/env bash
# Instructions per tools/call in the gateway, by client kind, counted by callgrind: a
# deterministic figure (BENCHMARKS.md, "MCP revisions over HTTP"), where timings on this
# kind of machine swing by more than the differences being measured.
#
#   cargo build --release --workspace --bins && scripts/callgrind-revisions.sh [CALLS]
#
# Needs valgrind and python3. For each kind, one `corral up` runs under callgrind with
# one fixture server; a client makes 300 warm-up calls of `echo` on one keep-alive
# connection, the counters are zeroed, CALLS (default 2000) calls are made and counted.
# Kinds: `2025` (a session: initialize, then Mcp-Session-Id), `2025+claim-bytes` (the
# same session, each request also carrying a `_meta` and headers the size of a 2026
# claim, under other names: what the bytes alone cost) and `2026` (stateless).
set -euo pipefail
calls=${1:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
corral=$root/target/release/corral
fixture=$root/target/release/corral-fixture
for tool in valgrind callgrind_control callgrind_annotate python3; do
    command -v "$tool" >/dev/null || { echo "callgrind-revisions: needs $tool" >&2; exit 1; }
done
[ -x "$corral" ] && [ -x "$fixture" ] || {
    echo "callgrind-revisions: build first: cargo build --release --workspace --bins" >&2
    exit 1
}
work=$(mktemp -d)
trap 'cd /; "$corral" -c "$work/corral.toml" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
printf '[servers.fixture]\ncommand = "%s"\n' "$fixture" >"$work/corral.toml"

cat >"$work/client.py" <<'EOF'
import http.client, json, sys
kind, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
token = open(d + "/.corral/token").read().strip()
host, port = open(d + "/.corral/endpoint").read().strip().split("//")[1].split("/")[0].split(":")
c = http.client.HTTPConnection(host, int(port))
hd = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
      "Accept": "application/json, text/event-stream"}
def post(body, headers):
    c.request("POST", "/mcp", json.dumps(body), headers)
    r = c.getresponse()
    return r, r.read()
def claim(prefix):
    return {prefix + "/protocolVersion": "2026-07-28", prefix + "/clientCapabilities": {},
            prefix + "/clientInfo": {"name": "corral-bench", "version": "0"}}
if kind.startswith("2025"):
    r, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "corral-bench", "version": "0"}}}, hd)
    hd = dict(hd, **{"Mcp-Session-Id": r.getheader("mcp-session-id"),
                     "MCP-Protocol-Version": "2025-11-25"})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, hd)
if kind != "2025":
    hd = dict(hd, **{"Mcp-Method": "tools/call", "Mcp-Name": "fixture__echo"})
if kind == "2026":
    hd["MCP-Protocol-Version"] = "2026-07-28"
for i in range(1, n + 1):
    params = {"name": "fixture__echo", "arguments": {"text": "hello"}}
    if kind != "2025":
        params["_meta"] = claim("io.modelcontextprotocol" if kind == "2026" else "xo.example")
    r, body = post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}, hd)
    assert r.status == 200 and b"hello" in body, body
EOF

echo "| client | gateway instructions per call |"
echo "|---|---:|"
for kind in 2025 2025+claim-bytes 2026; do
    rm -f "$work/.corral/endpoint"
    (cd "$work" && setsid valgrind --tool=callgrind --callgrind-out-file="$work/cg.$kind" \
        "$corral" up >"$work/up.log" 2>&1 &)
    for _ in $(seq 120); do
        [ -s "$work/.corral/endpoint" ] && grep -q ready "$work/up.log" && break
        sleep 1
    done
    python3 "$work/client.py" "$kind" 300 "$work"
    callgrind_control -z >/dev/null 2>&1
    python3 "$work/client.py" "$kind" "$calls" "$work"
    callgrind_control -d >/dev/null 2>&1
    "$corral" -c "$work/corral.toml" down >/dev/null 2>&1
    total=$(callgrind_annotate --auto=no "$work/cg.$kind.1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    printf '| %s | %s |\n' "$kind" "$((total / calls))"
done

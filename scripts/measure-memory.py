#!/usr/bin/env python3
"""The daemon's peak memory (VmHWM) for one large message through `corral mcp`.

usage: measure-memory.py CORRAL FIXTURE echo50|line200

echo50:  a tools/call of the fixture's echo with 50 MB of text, answered in full.
line200: a 200 MB line (a ping with a huge member), then a ping that must be answered.
Prints the daemon's VmHWM before and after, in MiB.
"""
import json, os, subprocess, sys, tempfile

corral, fixture, mode = sys.argv[1:4]
d = tempfile.mkdtemp(prefix="corral-mem-")
with open(os.path.join(d, "corral.toml"), "w") as f:
    f.write(f'[servers.fx]\ncommand = "{fixture}"\n')
p = subprocess.Popen([corral, "mcp"], cwd=d, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def send(obj):
    p.stdin.write(json.dumps(obj).encode() + b"\n")
    p.stdin.flush()


def recv(want):
    while True:
        line = p.stdout.readline()
        if not line:
            sys.exit("corral closed stdout")
        m = json.loads(line)
        if m.get("id") == want:
            return m


def hwm(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM"):
            return int(l.split()[1]) / 1024
    return 0


try:
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "mem", "version": "1"}}})
    recv(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    recv(2)
    pid = int(open(os.path.join(d, ".corral/daemon.pid")).read().split()[0])
    before = hwm(pid)
    if mode == "echo50":
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "fx__echo", "arguments": {"text": "x" * 50_000_000}}})
        r = recv(3)
        assert len(r["result"]["content"][0]["text"]) == 50_000_000, r
    else:
        p.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping","x":"')
        chunk = b"y" * (1 << 20)
        for _ in range(200):
            p.stdin.write(chunk)
        p.stdin.write(b'"}\n')
        p.stdin.flush()
        send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        print("answer to the long line:", p.stdout.readline()[:200].decode())
        recv(4)
    print(f"{mode}: daemon VmHWM {before:.1f} MiB before, {hwm(pid):.1f} MiB after")
finally:
    p.stdin.close()
    p.wait()
    subprocess.run([corral, "down"], cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

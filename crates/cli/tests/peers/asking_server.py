"""A 2025 (initialize) MCP server on stdio that asks its client during requests, for
tests of how Corral carries those questions to 2026-07-28 agents.

    asking_server.py LOG   (LOG: a file it appends what it saw to, one line each)

Tools: ask_two (two elicitations sent at once, then a progress notification when the
call had a progressToken), ask_then_wait (one elicitation, then a progress notification
when the call had a progressToken, then waits up to 60 s for the call to be cancelled:
logs "cancelled ID" or answers), ask_and_give_up (one
elicitation it waits 0.2 s for, then answers the call without it), ask_url (a URL-mode
elicitation with elicitationId "el-1"). Prompt asking_prompt (one
elicitation). Resource ask://roots (roots/list). Requests the server sends have string
ids; it never sends one before initialize.
"""

import json
import sys
import threading

LOG = sys.argv[1]
out_lock = threading.Lock()
waiting = {}  # our request id -> [Event, response]
cancelled = {}  # call id (JSON text) -> Event
state_lock = threading.Lock()
counter = [0]


def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")


def send(msg):
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def ask(method, params):
    with state_lock:
        counter[0] += 1
        rid = f"s{counter[0]}"
        slot = [threading.Event(), None]
        waiting[rid] = slot
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    return rid, slot


def answer_of(slot, timeout=60):
    if not slot[0].wait(timeout):
        return {"error": {"message": "no answer"}}
    return slot[1]


def form(message):
    return {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def describe(resp):
    if "error" in resp:
        return "error: " + resp["error"].get("message", "?")
    r = resp["result"]
    return r.get("action", "?") + ":" + json.dumps(r.get("content", {}), sort_keys=True)


def call_tool(rid, params):
    name = params.get("name")
    meta = params.get("_meta") or {}
    if name == "ask_two":
        _, a = ask("elicitation/create", form("first?"))
        _, b = ask("elicitation/create", form("second?"))
        got = f"{describe(answer_of(a))} / {describe(answer_of(b))}"
        if "progressToken" in meta:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": meta["progressToken"], "progress": 1, "total": 1}})
        return text("answers: " + got)
    if name == "ask_then_wait":
        _, a = ask("elicitation/create", form("then wait?"))
        log("answered " + describe(answer_of(a)))
        if "progressToken" in meta:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": meta["progressToken"], "progress": 1}})
        key = json.dumps(rid)
        with state_lock:
            ev = cancelled.setdefault(key, threading.Event())
        if ev.wait(60):
            log("cancelled " + key)
            return None
        return text("not cancelled")
    if name == "ask_and_give_up":
        _, a = ask("elicitation/create", form("quick?"))
        got = describe(answer_of(a, timeout=0.2))
        log("gave up with " + got)
        return text("gave up: " + got)
    if name == "ask_url":
        _, a = ask("elicitation/create", {
            "mode": "url", "message": "sign in", "url": "https://example.com/login",
            "elicitationId": "el-1"})
        return text("url " + describe(answer_of(a)))
    return None


def handle(msg):
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            "serverInfo": {"name": "asking", "version": "1"},
        }
    elif method == "tools/list":
        schema = {"type": "object"}
        result = {"tools": [{"name": n, "inputSchema": schema} for n in
                            ("ask_two", "ask_then_wait", "ask_and_give_up", "ask_url")]}
    elif method == "tools/call":
        result = call_tool(rid, params)
        if result is None:
            return
    elif method == "prompts/list":
        result = {"prompts": [{"name": "asking_prompt"}]}
    elif method == "prompts/get":
        _, a = ask("elicitation/create", form("prompt for whom?"))
        result = {"messages": [{"role": "user", "content": {
            "type": "text", "text": "prompt " + describe(answer_of(a))}}]}
    elif method == "resources/list":
        result = {"resources": [{"uri": "ask://roots", "name": "roots"}]}
    elif method == "resources/read":
        _, a = ask("roots/list", {})
        resp = answer_of(a)
        if "error" in resp:
            got = "roots error: " + resp["error"].get("message", "?")
        else:
            got = "roots: " + ",".join(r["uri"] for r in resp["result"]["roots"])
        result = {"contents": [{"uri": params.get("uri"), "text": got}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
        return
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "method" not in msg:
            with state_lock:
                slot = waiting.pop(msg.get("id"), None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            continue
        if "id" not in msg:
            if msg["method"] == "notifications/cancelled":
                key = json.dumps(msg["params"]["requestId"])
                with state_lock:
                    cancelled.setdefault(key, threading.Event()).set()
            continue
        threading.Thread(target=handle, args=(msg,), daemon=True).start()


main()

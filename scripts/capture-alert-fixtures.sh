#!/usr/bin/env bash
# Captures the verbatim error output of real tools into crates/alerts/tests/fixtures/,
# for crates/alerts/tests/real_output.rs. Each tool is used only where installed; a
# missing one is reported and its fixtures are left as they are.
#
# The programs are written under a stable directory (CORRAL_FIXTURE_DIR, default
# /tmp/corral-fixtures/<name>), so the paths inside the fixtures, and their diffs on
# regeneration, stay small. What each fixture must contain is asserted by the tests:
# after regenerating, run `cargo test -p corral-alerts --test real_output`.
#
#   tsc comes from `npx -y -p typescript tsc` (downloads TypeScript into npm's cache).
#   go and javac: `apt-get install -y golang-go default-jdk-headless` on Debian.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$PWD/crates/alerts/tests/fixtures
base=${CORRAL_FIXTURE_DIR:-/tmp/corral-fixtures}
mkdir -p "$out"

have() { command -v "$1" >/dev/null 2>&1 || { echo "skip: $1 not installed" >&2; return 1; }; }
# Runs a command in a fresh $base/<name>, saving stdout+stderr (as a terminal-less run
# interleaves them) to fixtures/<name>.txt; the exit status is expected to be non-zero.
capture() {
    local name=$1; shift
    ( cd "$base/$name" && "$@" ) >"$out/$name.txt" 2>&1
    echo "captured $name ($(wc -l <"$out/$name.txt") lines)" >&2
}
fresh() { rm -rf "${base:?}/$1"; mkdir -p "$base/$1"; }

if have cargo; then
    fresh rust_type_error
    (cd "$base/rust_type_error" && cargo init -q --name typo --vcs none)
    cat >"$base/rust_type_error/src/main.rs" <<'RS'
fn main() {
    let port: u16 = std::env::args().count();
    let name: i32 = "corral";
    println!("{port} {name}");
}
RS
    capture rust_type_error cargo build -q --color never

    fresh rust_panic
    (cd "$base/rust_panic" && cargo init -q --name boom --vcs none)
    cat >"$base/rust_panic/src/main.rs" <<'RS'
fn parse_port(text: &str) -> u16 {
    text.parse().expect("PORT must be a number")
}

fn main() {
    println!("starting");
    let port = parse_port("eighty");
    println!("{port}");
}
RS
    (cd "$base/rust_panic" && cargo build -q)
    capture rust_panic env RUST_BACKTRACE=1 ./target/debug/boom
fi

if have python3; then
    fresh python_traceback
    cat >"$base/python_traceback/app.py" <<'PY'
import json
from datetime import datetime


def parse_event(obj):
    # Called back by the stdlib (json), and failing inside the stdlib (_strptime):
    # the innermost frame is library code, the one to report is this one.
    if "at" in obj:
        obj["at"] = datetime.strptime(obj["at"], "%Y-%m-%d")
    return obj


def load(doc):
    return json.loads(doc, object_hook=parse_event)


print("loading events")
print(load('[{"at": "2024-01-31"}, {"at": "31/01/2024"}]'))
PY
    capture python_traceback python3 app.py

    fresh python_syntax_error
    printf 'def handler(request):\n    return {"ok": True\n\nprint(handler(None))\n' \
        >"$base/python_syntax_error/app.py"
    capture python_syntax_error python3 app.py
fi

if have node; then
    fresh node_type_error
    cat >"$base/node_type_error/server.js" <<'JS'
function userName(user) {
  return user.profile.name.toUpperCase();
}

const users = [{ profile: { name: "ada" } }, {}];
console.log("rendering", users.length, "users");
users.map(userName).forEach((n) => console.log(n));
JS
    capture node_type_error node server.js

    fresh node_unhandled_rejection
    cat >"$base/node_unhandled_rejection/worker.js" <<'JS'
async function fetchJob(id) {
  await null;
  throw new Error(`job ${id} not found`);
}

fetchJob(42).then((job) => console.log(job));
JS
    capture node_unhandled_rejection node worker.js

    fresh node_rejection_value
    echo 'Promise.reject("config missing");' >"$base/node_rejection_value/main.js"
    capture node_rejection_value node main.js

    fresh node_module_not_found
    echo 'const x = require("./lib/missing-helper"); console.log(x);' >"$base/node_module_not_found/index.js"
    capture node_module_not_found node index.js
fi

if have npx; then
    fresh tsc_error
    cat >"$base/tsc_error/app.ts" <<'TS'
interface Config {
  port: number;
}

const config: Config = { port: "8080" };
console.log(config.port);
TS
    capture tsc_error npx -y -p typescript@5 tsc --noEmit --pretty false app.ts
    fresh tsc_error_pretty
    cp "$base/tsc_error/app.ts" "$base/tsc_error_pretty/app.ts"
    capture tsc_error_pretty npx -y -p typescript@5 tsc --noEmit --pretty true app.ts
fi

if have go; then
    fresh go_panic
    cat >"$base/go_panic/main.go" <<'GO'
package main

import (
	"fmt"
	"sort"
)

func pick(items []string, i int) string {
	return items[i]
}

func main() {
	items := []string{"a", "b", "c"}
	sort.Slice(items, func(a, b int) bool { return pick(items, a+5) < items[b] })
	fmt.Println(items)
}
GO
    capture go_panic go run main.go

    fresh go_build_error
    cat >"$base/go_build_error/main.go" <<'GO'
package main

import "fmt"

func main() {
	var port int = "8080"
	fmt.Println(port)
}
GO
    (cd "$base/go_build_error" && go mod init example.com/buildfail >/dev/null 2>&1)
    capture go_build_error go build ./...
fi

if have javac && have java; then
    fresh java_exception
    cat >"$base/java_exception/Main.java" <<'JAVA'
import java.util.List;

public class Main {
    static int parsePort(String text) {
        return Integer.parseInt(text);
    }

    static void start(List<String> args) {
        try {
            System.out.println("port " + parsePort(args.get(0)));
        } catch (NumberFormatException e) {
            throw new IllegalStateException("cannot start server", e);
        }
    }

    public static void main(String[] argv) {
        start(List.of("eighty"));
    }
}
JAVA
    (cd "$base/java_exception" && javac Main.java)
    capture java_exception java -cp . Main
fi

# ---- BEGIN context fixtures: chained exceptions, for the alert's function, code, ----
# ---- cause and frames (crates/alerts/tests/real_output.rs, "Chained exceptions") ----
# In the groups python, node and java where the script takes groups on its command line.
declare -F want >/dev/null || want() { return 0; }
if want python && have python3; then
    # An app-like layout: a handler calling a data module, the data function failing.
    fresh python_chained_cause
    cat >"$base/python_chained_cause/web.py" <<'PY'
class HTTPException(Exception):
    def __init__(self, status, detail):
        super().__init__(f"{status}: {detail}")
        self.status = status
PY
    cat >"$base/python_chained_cause/data.py" <<'PY'
USERS = {1: {"name": "ada", "plan": "pro"}}


def get_user(user_id):
    return USERS[user_id]


def get_stats(user_id):
    user = get_user(user_id)
    return {"plan": user["plan"].upper()}
PY
    cat >"$base/python_chained_cause/app.py" <<'PY'
from data import get_stats
from web import HTTPException


def handler(request):
    try:
        return get_stats(request["user_id"])
    except KeyError as e:
        raise HTTPException(404, f"no user {request['user_id']}") from e


def main():
    print("serving")
    print(handler({"user_id": 2}))


main()
PY
    capture python_chained_cause python3 app.py

    # The implicit form: the except block itself fails.
    fresh python_chained_context
    cat >"$base/python_chained_context/settings.py" <<'PY'
import tomllib


def load_settings(path):
    with open(path, "rb") as f:
        return tomllib.load(f)
PY
    cat >"$base/python_chained_context/app.py" <<'PY'
from settings import load_settings

DEFAULTS = {"prod": {"debug": False}}


def settings_for(profile):
    try:
        return load_settings(f"{profile}.toml")
    except FileNotFoundError:
        return DEFAULTS[profile]


print("starting")
print(settings_for("dev"))
PY
    capture python_chained_context python3 app.py
fi

if want node && have node; then
    fresh node_error_cause
    cat >"$base/node_error_cause/users.js" <<'JS'
class UserStore {
  constructor(rows) {
    this.rows = rows;
  }

  find(id) {
    const row = this.rows.get(id);
    return row.name.trim();
  }
}

function loadUser(store, id) {
  try {
    return store.find(id);
  } catch (err) {
    throw new Error(`cannot load user ${id}`, { cause: err });
  }
}

module.exports = { UserStore, loadUser };
JS
    cat >"$base/node_error_cause/server.js" <<'JS'
const { UserStore, loadUser } = require("./users");

function handler(req) {
  return { user: loadUser(new UserStore(new Map()), req.id) };
}

console.log("listening");
handler({ id: 7 });
JS
    capture node_error_cause node server.js

    # ESM, causes nested two deep, a constructor and async frames.
    fresh node_error_cause_nested
    cat >"$base/node_error_cause_nested/main.mjs" <<'JS'
class Repo {
  constructor(cfg) {
    if (!cfg.url) throw new TypeError("repo needs a url");
  }
}

async function connect(cfg) {
  await null;
  try {
    return new Repo(cfg);
  } catch (e) {
    throw new Error("connect failed", { cause: e });
  }
}

async function boot() {
  try {
    await connect({});
  } catch (e) {
    throw new Error("boot failed", { cause: e });
  }
}

await boot();
JS
    capture node_error_cause_nested node main.mjs
fi

if want java && have javac && have java; then
    fresh java_caused_by_chain
    mkdir -p "$base/java_caused_by_chain/com/acme"
    cat >"$base/java_caused_by_chain/com/acme/UserRepo.java" <<'JAVA'
package com.acme;

import java.util.Map;

public class UserRepo {
    private final Map<String, String> rows = Map.of("7", "id=x7;name=ada");

    static int parseId(String row) {
        return Integer.parseInt(row.substring(3, row.indexOf(';')));
    }

    public int find(String key) {
        try {
            return parseId(rows.get(key));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad row for user " + key, e);
        }
    }
}
JAVA
    cat >"$base/java_caused_by_chain/com/acme/Api.java" <<'JAVA'
package com.acme;

public class Api {
    private final UserRepo repo = new UserRepo();

    public int load(String key) {
        try {
            return repo.find(key);
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException("cannot load user " + key, e);
        }
    }

    public static void main(String[] args) {
        System.out.println("serving");
        System.out.println(new Api().load("7"));
    }
}
JAVA
    (cd "$base/java_caused_by_chain" && javac com/acme/*.java)
    capture java_caused_by_chain java -cp . com.acme.Api
fi
if want ruby && have ruby; then
    # The raising line is in user code (3.1+ prints its source under the message).
    fresh ruby_no_method_error
    mkdir -p "$base/ruby_no_method_error/lib"
    cat >"$base/ruby_no_method_error/lib/users.rb" <<'RB'
class UserStore
  def initialize(rows)
    @rows = rows
  end

  def display_name(id)
    @rows[id][:name].strip
  end
end
RB
    cat >"$base/ruby_no_method_error/app.rb" <<'RB'
require_relative "lib/users"

def handler(params)
  store = UserStore.new({ 1 => { name: " ada " } })
  store.display_name(params[:id])
end

[1, 2].each { |id| puts handler({ id: id }) }
RB
    capture ruby_no_method_error ruby app.rb
fi

if want go && have go; then
    # A goroutine's panic in a method, and where the goroutine was started.
    fresh go_goroutine_panic
    cat >"$base/go_goroutine_panic/main.go" <<'GO'
package main

import (
	"fmt"
	"sync"
)

type Server struct{ sessions map[string]int }

func (s *Server) handle(user string) {
	s.sessions[user]++
}

func main() {
	s := &Server{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.handle("ada")
	}()
	wg.Wait()
	fmt.Println(s.sessions)
}
GO
    capture go_goroutine_panic go run main.go
fi
# ---- END context fixtures ----

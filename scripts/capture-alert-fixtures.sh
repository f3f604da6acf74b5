#!/usr/bin/env bash
# Captures the verbatim output of real tools into crates/alerts/tests/fixtures/, for
# crates/alerts/tests/real_output.rs. Each tool is used only where installed; a missing
# one is reported and its fixtures are left as they are.
#
#   scripts/capture-alert-fixtures.sh                 # every tool
#   scripts/capture-alert-fixtures.sh vite 'django*'  # only these groups (globs)
#
# Groups: rust python node tsc go java npm yarn nodemon webpack cra vite django flask
# uvicorn maven gradle ant ruby.
#
# The programs are written under a stable directory (CORRAL_FIXTURE_DIR, default
# /tmp/corral-fixtures/<name>), so the paths inside the fixtures, and their diffs on
# regeneration, stay small. What each fixture must contain is asserted by the tests:
# after regenerating, run `cargo test -p corral-alerts --test real_output`.
#
#   tsc comes from `npx -y -p typescript tsc` (downloads TypeScript into npm's cache).
#   go, javac, ruby, Maven, Gradle: `apt-get install -y golang-go default-jdk-headless
#   ruby maven maven-debian-helper libmaven-compiler-plugin-java
#   libmaven-resources-plugin-java junit5 gradle ant` on Debian (Maven runs offline on
#   Debian's own repository, /usr/share/maven-repo).
#   The Node tools (webpack, webpack-dev-server, react-dev-utils, Vite, nodemon, npm 9,
#   yarn 1 and 4) are installed from npm, and Django, Flask, FastAPI and uvicorn from
#   PyPI into a venv, both under $base/.tools (CORRAL_FIXTURE_TOOLS), once.
#
# Watching tools (dev servers, nodemon, tsc --watch) run in the background, in a
# session of their own, while the script edits their files, to capture their reload
# lines; a step that times out is reported and the fixture is kept as far as it got.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$PWD/crates/alerts/tests/fixtures
base=${CORRAL_FIXTURE_DIR:-/tmp/corral-fixtures}
tools=${CORRAL_FIXTURE_TOOLS:-$base/.tools}
mkdir -p "$out" "$tools"
groups=("$@")

have() { command -v "$1" >/dev/null 2>&1 || { echo "skip: $1 not installed" >&2; return 1; }; }
# Whether the group was asked for (all are when none is named).
want() {
    [ ${#groups[@]} -eq 0 ] && return 0
    local g
    for g in "${groups[@]}"; do
        # shellcheck disable=SC2053 # globs on purpose
        [[ $1 == $g ]] && return 0
    done
    return 1
}
# Runs a command in a fresh $base/<name>, saving stdout+stderr (as a terminal-less run
# interleaves them) to fixtures/<name>.txt; the exit status is expected to be non-zero.
capture() {
    local name=$1; shift
    ( cd "$base/$name" && "$@" ) >"$out/$name.txt" 2>&1
    echo "captured $name ($(wc -l <"$out/$name.txt") lines)" >&2
}
fresh() { rm -rf "${base:?}/$1"; mkdir -p "$base/$1"; }

# ---- watching tools: started in the background, driven by editing their files ----
# Starts a command in $base/<name> in a session of its own (so that bg_stop reaches
# its children), its stdout+stderr going to fixtures/<name>.txt.
bg_start() {
    local name=$1; shift
    bg_name=$name
    bg_log=$out/$name.txt
    : >"$bg_log"
    ( cd "$base/$name" && exec setsid "$@" ) >"$bg_log" 2>&1 &
    bg_pid=$!
}
# Waits (at most 60 s) until the output has COUNT (default 1) lines matching the ERE.
bg_wait() {
    local i
    for ((i = 0; i < 600; i++)); do
        [ "$(grep -Ec -- "$1" "$bg_log")" -ge "${2:-1}" ] && return 0
        sleep 0.1
    done
    echo "timeout: $bg_name never printed /$1/ ${2:-1} time(s)" >&2
    return 1
}
bg_stop() {
    kill -TERM -- "-$bg_pid" 2>/dev/null
    wait "$bg_pid" 2>/dev/null
    echo "captured $bg_name ($(wc -l <"$bg_log") lines)" >&2
}
# After a second (the watcher's debounce), applies the sed EXPR to the tool's FILE (under
# $base) and waits until the output has COUNT (default 1) lines matching the ERE.
edit_then_wait() {
    sleep 1 && sed -i "$2" "$base/$1" && bg_wait "$3" "${4:-1}"
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# The Node tools, once, into $tools/node.
node_tools() {
    local dir=$tools/node
    [ -x "$dir/node_modules/.bin/vite" ] && [ -d "$dir/node_modules/react-dev-utils" ] && return 0
    have npm || return 1
    mkdir -p "$dir" && echo '{"private": true}' >"$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
        webpack@5 webpack-cli@5 webpack-dev-server@5 react-dev-utils@12 vite@6 nodemon@3 \
        npm@9 yarn@1 @yarnpkg/cli-dist@4) >&2
}
# Django, Flask, FastAPI and uvicorn, once, into the venv $tools/py.
py_tools() {
    [ -x "$tools/py/bin/uvicorn" ] && return 0
    have python3 || return 1
    python3 -m venv "$tools/py" &&
        "$tools/py/bin/pip" install -q django flask fastapi 'uvicorn[standard]' >&2
}
nm=$tools/node/node_modules
# Node programs of the tools, run with the machine's node.
export npm_config_userconfig=/dev/null npm_config_update_notifier=false \
    npm_config_cache=$tools/npm-cache PYTHONUNBUFFERED=1

if want rust && have cargo; then
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

if want python && have python3; then
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

if want node && have node; then
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

if want tsc && have npx; then
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

if want go && have go; then
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

if want java && have javac && have java; then
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

# ---- Java without a stack, javac ----
if want java && have javac && have java; then
    fresh java_no_stack
    cat >"$base/java_no_stack/Server.java" <<'JAVA'
public class Server {
    public static void main(String[] args) {
        throw new IllegalStateException("PORT is not set");
    }
}
JAVA
    (cd "$base/java_no_stack" && javac Server.java)
    # A JVM started with -XX:-StackTraceInThrowable prints exceptions without frames.
    capture java_no_stack java -XX:-StackTraceInThrowable -cp . Server
    fresh java_main_class
    capture java_main_class java -cp . com.example.Missing

    fresh javac_error
    cat >"$base/javac_error/App.java" <<'JAVA'
public class App {
    public static void main(String[] args) {
        int port = parsePort(args);
        System.out.println("port " + port);
    }
}
JAVA
    capture javac_error javac App.java
fi

# ---- Go: module errors ----
if want go && have go; then
    fresh go_module_error
    printf 'package main\n\nfunc main() {}\n' >"$base/go_module_error/main.go"
    # No go.mod at all, then a go.mod with a syntax error.
    capture go_module_error sh -c 'go run .; printf "module example.com/api\n\ngo 1.19\n\nrequire (\n" >go.mod; go build ./...'
fi

# ---- Ruby ----
if want ruby && have ruby; then
    fresh ruby_errno
    cat >"$base/ruby_errno/client.rb" <<'RB'
require "net/http"

def fetch_status
  # Nothing listens on the discard port of a dev machine.
  Net::HTTP.get_response(URI("http://127.0.0.1:9/health")).code
end

puts fetch_status
RB
    capture ruby_errno ruby client.rb
    fresh ruby_enoent
    capture ruby_enoent ruby -e 'File.read("config/missing.yml")'
fi

# ---- npm (the machine's, 10+, and npm 9) ----
if want npm && have npm && node_tools; then
    for v in "" 9; do
        npm_cmd=(npm)
        [ -n "$v" ] && npm_cmd=(node "$nm/npm/bin/npm-cli.js")
        echo "npm${v:+ $v}: $("${npm_cmd[@]}" --version)" >&2
        fresh "npm${v}_missing_script"
        echo '{"name": "web", "version": "1.0.0", "private": true, "scripts": {"start": "node server.js"}}' \
            >"$base/npm${v}_missing_script/package.json"
        capture "npm${v}_missing_script" "${npm_cmd[@]}" run dev

        fresh "npm${v}_script_failed"
        echo '{"name": "web", "version": "1.0.0", "private": true, "scripts": {"postinstall": "node setup.js"}}' \
            >"$base/npm${v}_script_failed/package.json"
        echo 'console.error("setup: .env is missing"); process.exit(3);' >"$base/npm${v}_script_failed/setup.js"
        capture "npm${v}_script_failed" "${npm_cmd[@]}" install
    done
fi

# ---- yarn 1 and yarn 4 (berry) ----
if want yarn && have node && node_tools; then
    yarn1=(node "$nm/yarn/bin/yarn.js")
    berry=(node "$nm/@yarnpkg/cli-dist/bin/yarn.js")
    echo "yarn $("${yarn1[@]}" --version), yarn $("${berry[@]}" --version)" >&2
    fresh yarn1_errors
    echo '{"name": "web", "version": "1.0.0", "private": true, "scripts": {"build": "node build.js"}}' \
        >"$base/yarn1_errors/package.json"
    echo 'console.error("build: src/ not found"); process.exit(2);' >"$base/yarn1_errors/build.js"
    capture yarn1_errors sh -c '"$@" run build; "$@" run dev' sh "${yarn1[@]}"

    fresh yarn_berry_errors
    echo '{"name": "web", "version": "1.0.0", "private": true, "dependencies": {"helper": "file:./missing-helper"}}' \
        >"$base/yarn_berry_errors/package.json"
    touch "$base/yarn_berry_errors/yarn.lock"
    export YARN_ENABLE_TELEMETRY=0
    # A dependency that is not there; then, installed without it, a script that is not
    # there.
    capture yarn_berry_errors sh -c '"$@" install; sed -i "s/\"helper\": [^}]*//" package.json;
        "$@" install; "$@" run dev' sh "${berry[@]}"
fi

# ---- nodemon: a crash and the restarts around it ----
if want nodemon && have node && node_tools; then
    echo "nodemon $(node "$nm/nodemon/bin/nodemon.js" --version)" >&2
    fresh nodemon_crash
    cat >"$base/nodemon_crash/server.js" <<'JS'
const http = require("http");
const server = http.createServer((req, res) => res.end("ok"));
server.listen(Number(process.env.PORT), () => console.log(`listening on ${process.env.PORT}`));
JS
    PORT=$(free_port) && export PORT
    bg_start nodemon_crash node "$nm/nodemon/bin/nodemon.js" server.js
    bg_wait '^listening' &&
        edit_then_wait nodemon_crash/server.js '1i const config = require("./config.json");' 'app crashed' &&
        edit_then_wait nodemon_crash/server.js 1d '^listening' 2
    bg_stop
fi

# A webpack project whose entry computes $2.
webpack_app() {
    mkdir -p "$base/$1/src"
    echo 'module.exports = { mode: "development", entry: "./src/index.js", devtool: false };' \
        >"$base/$1/webpack.config.js"
    echo 'export const greet = (name) => `hi ${name}`;' >"$base/$1/src/greet.js"
    printf 'import { greet } from "./greet";\n\nconst total = %s;\nconsole.log(greet("ada"), total);\n' "$2" \
        >"$base/$1/src/index.js"
}
# ---- webpack: a CLI build, and webpack-dev-server across a broken and a fixed edit ----
if want webpack && have node && node_tools; then
    echo "webpack $(node -p "require('$nm/webpack/package.json').version")" >&2
    fresh webpack_error
    webpack_app webpack_error '1 +'
    capture webpack_error node "$nm/webpack/bin/webpack.js"

    fresh webpack_dev_server
    webpack_app webpack_dev_server '1 + 2'
    bg_start webpack_dev_server node "$nm/webpack/bin/webpack.js" serve --host 127.0.0.1 --port "$(free_port)" --no-open
    bg_wait 'compiled successfully' &&
        edit_then_wait webpack_dev_server/src/index.js 's/1 + 2/1 +/' 'compiled with 1 error' &&
        edit_then_wait webpack_dev_server/src/index.js 's/1 +;/1 + 2;/' 'compiled successfully' 2
    bg_stop
fi

# ---- Create React App's messages (react-dev-utils' createCompiler over webpack) ----
if want cra && have node && node_tools; then
    fresh cra_failed_to_compile
    webpack_app cra_failed_to_compile '1 + 2'
    cat >"$base/cra_failed_to_compile/start.js" <<JS
// What react-scripts start does with the compiler: CRA's own createCompiler prints
// Compiling... / Compiled successfully! / Failed to compile. for each build.
const webpack = require("$nm/webpack");
const { createCompiler, prepareUrls } = require("$nm/react-dev-utils/WebpackDevServerUtils");
const config = require("./webpack.config.js");
const urls = prepareUrls("http", "0.0.0.0", $(free_port));
const compiler = createCompiler({ appName: "web", config, urls, useYarn: false, useTypeScript: false, webpack });
compiler.watch({}, () => {});
JS
    bg_start cra_failed_to_compile node start.js
    bg_wait 'Compiled successfully' &&
        edit_then_wait cra_failed_to_compile/src/index.js 's/1 + 2/1 +/' 'Failed to compile' &&
        edit_then_wait cra_failed_to_compile/src/index.js 's/1 +;/1 + 2;/' 'Compiled successfully' 2
    bg_stop
fi

# ---- Vite's dev server: a module with a syntax error requested, and HMR ----
if want vite && have node && node_tools; then
    echo "vite $(node "$nm/vite/bin/vite.js" --version)" >&2
    vite_app() {
        mkdir -p "$base/$1/src"
        echo '<!doctype html><html><body><div id="app"></div><script type="module" src="/src/main.js"></script></body></html>' \
            >"$base/$1/index.html"
        cat >"$base/$1/src/main.js" <<'JS'
import { greet } from "./greet.js";

document.querySelector("#app").textContent = greet("ada");
if (import.meta.hot) import.meta.hot.accept();
JS
        printf 'export function greet(name) {\n  return %s;\n}\n' "$2" >"$base/$1/src/greet.js"
    }
    fresh vite_transform_error
    vite_app vite_transform_error '`hi ${name`'
    port=$(free_port)
    bg_start vite_transform_error node "$nm/vite/bin/vite.js" --port "$port" --strictPort
    # A browser's requests: the page, then the modules it imports.
    bg_wait 'ready in' && for p in / /src/main.js /src/greet.js; do
        curl -s -o /dev/null "http://localhost:$port$p"
    done && bg_wait 'Internal server error'
    sleep 0.5
    bg_stop

    fresh vite_hmr
    vite_app vite_hmr '`hi ${name}`'
    echo 'export default {};' >"$base/vite_hmr/vite.config.js"
    port=$(free_port)
    bg_start vite_hmr node "$nm/vite/bin/vite.js" --port "$port" --strictPort
    bg_wait 'ready in' && for p in / /src/main.js /src/greet.js; do
        curl -s -o /dev/null "http://localhost:$port$p"
    done && sleep 1 &&
        sed -i 's/hi /hello /' "$base/vite_hmr/src/greet.js" && bg_wait 'hmr update|page reload' &&
        sleep 1 && sed -i 's/<body>/<body class="x">/' "$base/vite_hmr/index.html" &&
        bg_wait 'page reload index.html' && sleep 1 &&
        echo 'export default { clearScreen: false };' >"$base/vite_hmr/vite.config.js" &&
        bg_wait 'server restarted'
    sleep 0.5
    bg_stop
fi

# ---- Django's runserver ----
if want django && py_tools; then
    echo "django $("$tools/py/bin/python" -m django --version)" >&2
    django_app() {
        mkdir -p "$base/$1/shop" && touch "$base/$1/shop/__init__.py"
        cat >"$base/$1/manage.py" <<'PY'
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
PY
        cat >"$base/$1/shop/settings.py" <<'PY'
DEBUG = True
SECRET_KEY = "fixture-only"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = []
DATABASES = {}
PY
        cat >"$base/$1/shop/urls.py" <<'PY'
from django.http import JsonResponse
from django.urls import path


def cart(request):
    items = request.session_items
    return JsonResponse({"items": items})


urlpatterns = [path("cart", cart)]
PY
    }
    # The database backend's driver is not installed: runserver fails at start-up.
    fresh django_improperly_configured
    django_app django_improperly_configured
    cat >>"$base/django_improperly_configured/shop/settings.py" <<'PY'
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "shop"}}
PY
    bg_start django_improperly_configured "$tools/py/bin/python" manage.py runserver "$(free_port)"
    bg_wait 'ImproperlyConfigured'
    bg_stop

    fresh django_request_error
    django_app django_request_error
    port=$(free_port)
    bg_start django_request_error "$tools/py/bin/python" manage.py runserver "$port"
    bg_wait 'Quit the server' && curl -s -o /dev/null "http://127.0.0.1:$port/cart" && bg_wait '"GET /cart'
    bg_stop

    fresh django_reload
    django_app django_reload
    bg_start django_reload "$tools/py/bin/python" manage.py runserver "$(free_port)"
    bg_wait 'Quit the server' && sleep 1.5 &&
        sed -i 's/"items": items/"items": list(items)/' "$base/django_reload/shop/urls.py" &&
        bg_wait 'Quit the server' 2
    bg_stop
fi

# ---- Flask's dev server (werkzeug) ----
if want flask && py_tools; then
    echo "flask: $("$tools/py/bin/flask" --version | tr '\n' ' ')" >&2
    flask_app() {
        cat >"$base/$1/app.py" <<'PY'
from flask import Flask, request

app = Flask(__name__)


@app.get("/orders")
def orders():
    limit = int(request.args["limit"])
    return {"limit": limit}
PY
    }
    fresh flask_request_error
    flask_app flask_request_error
    port=$(free_port)
    bg_start flask_request_error "$tools/py/bin/flask" --app app run --port "$port"
    bg_wait 'Running on' && curl -s -o /dev/null "http://127.0.0.1:$port/orders?limit=ten" &&
        bg_wait 'GET /orders'
    bg_stop

    fresh flask_reload
    flask_app flask_reload
    bg_start flask_reload "$tools/py/bin/flask" --app app run --debug --port "$(free_port)"
    bg_wait 'Debugger PIN' && sleep 1.5 && sed -i 's/"limit": limit/"limit": limit, "ok": True/' \
        "$base/flask_reload/app.py" && bg_wait 'Debugger PIN' 2
    bg_stop
fi

# ---- uvicorn (FastAPI) ----
if want uvicorn && py_tools; then
    echo "uvicorn $("$tools/py/bin/uvicorn" --version)" >&2
    uvicorn_app() {
        cat >"$base/$1/main.py" <<'PY'
from fastapi import FastAPI

app = FastAPI()
ITEMS = {1: {"name": "lamp"}}


@app.get("/items/{item_id}")
def get_item(item_id: int):
    item = ITEMS[item_id]
    return {"id": item_id, "owner": item["owner"]}
PY
    }
    fresh uvicorn_asgi_error
    uvicorn_app uvicorn_asgi_error
    port=$(free_port)
    bg_start uvicorn_asgi_error "$tools/py/bin/uvicorn" main:app --port "$port"
    bg_wait 'startup complete' && curl -s -o /dev/null "http://127.0.0.1:$port/items/1" &&
        bg_wait '^KeyError'
    bg_stop

    fresh uvicorn_reload
    uvicorn_app uvicorn_reload
    bg_start uvicorn_reload "$tools/py/bin/uvicorn" main:app --reload --port "$(free_port)"
    bg_wait 'startup complete' &&
        edit_then_wait uvicorn_reload/main.py 's/"lamp"/"desk lamp"/' 'startup complete' 2
    bg_stop
fi

# ---- Maven (offline, on Debian's repository) and Gradle ----
java_app() {
    mkdir -p "$base/$1/src/main/java/com/example"
    cat >"$base/$1/src/main/java/com/example/App.java" <<'JAVA'
package com.example;

public class App {
    public static void main(String[] args) {
        int port = parsePort(args);
        System.out.println("port " + port);
    }
}
JAVA
}
if want maven && have mvn; then
    fresh maven_compile_error
    java_app maven_compile_error
    cat >"$base/maven_compile_error/pom.xml" <<'XML'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>app</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
</project>
XML
    settings=()
    [ -f /etc/maven/settings-debian.xml ] && settings=(-o -s /etc/maven/settings-debian.xml)
    capture maven_compile_error mvn -B "${settings[@]}" compile

    # A dependency that no repository has.
    fresh maven_dependency_error
    java_app maven_dependency_error
    sed 's|</properties>|</properties>\n  <dependencies>\n    <dependency><groupId>com.acme</groupId><artifactId>billing-client</artifactId><version>2.1.0</version></dependency>\n  </dependencies>|' \
        "$base/maven_compile_error/pom.xml" >"$base/maven_dependency_error/pom.xml"
    capture maven_dependency_error mvn -B "${settings[@]}" compile
fi
if want gradle && have gradle; then
    fresh gradle_build_failed
    java_app gradle_build_failed
    echo "apply plugin: 'java'" >"$base/gradle_build_failed/build.gradle"
    echo "rootProject.name = 'app'" >"$base/gradle_build_failed/settings.gradle"
    capture gradle_build_failed gradle --offline --no-daemon build
fi

if want ant && have ant; then
    fresh ant_build_failed
    java_app ant_build_failed
    cat >"$base/ant_build_failed/build.xml" <<'XML'
<project name="app" default="compile">
  <target name="compile">
    <mkdir dir="build"/>
    <javac srcdir="src/main/java" destdir="build" includeantruntime="false"/>
  </target>
</project>
XML
    capture ant_build_failed ant
fi

# ---- tsc --watch: an error and its fix ----
if want tsc && have npx; then
    fresh tsc_watch
    printf 'const answer: number = 42;\nconsole.log(answer);\n' >"$base/tsc_watch/app.ts"
    bg_start tsc_watch npx -y -p typescript@5 tsc --watch --preserveWatchOutput --noEmit --pretty false app.ts
    bg_wait 'Watching for file changes' &&
        edit_then_wait tsc_watch/app.ts 's/= 42;/= "42";/' 'Found 1 error' &&
        edit_then_wait tsc_watch/app.ts 's/= "42";/= 42;/' 'Found 0 errors' 2
    bg_stop
fi

# ---- BEGIN context fixtures: chained exceptions, for the alert's function, code, ----
# ---- cause and frames (crates/alerts/tests/real_output.rs, "Chained exceptions") ----
# In the groups python, node, java, ruby and go.
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

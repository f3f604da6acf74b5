//! Incidents through a real daemon: a backend (a dev process) behind Corral's dev proxy
//! that answers 500 and prints its traceback only afterwards (as uvicorn does), asked
//! about at once; and the same request succeeding later resolving the incident.

mod common;
use common::http::request;
use common::*;
use serde_json::Value;
use std::net::TcpListener;

/// A backend on port `argv[1]`: `/api/stats` answers 500 while the file `fixed` is
/// missing, and prints the handler's traceback 400 ms after the answer went out.
const BACKEND: &str = r#"import http.server, os, sys, threading, time, traceback

def total_visits(stats):
    return stats["visits"]

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if os.path.exists("fixed"):
            self.reply(200, b'{"visits": 4}')
            return
        self.reply(500, b'{"detail": "Internal Server Error"}')
        def log_later():
            time.sleep(0.4)
            try:
                total_visits({})
            except KeyError:
                traceback.print_exc()
                sys.stderr.flush()
        threading.Thread(target=log_later).start()

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"#;

/// A project with the backend on a free port and a proxy in front of it; returns it
/// and the proxy's address once both run.
fn backend_behind_proxy() -> (Project, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let p = Project::new(&format!(
        "[processes.api]\ncommand = \"python3 -u api.py {port}\"\nready = {{ port = {port} }}\n\n\
         [proxies.web]\ntarget = \"http://127.0.0.1:{port}\"\n"
    ));
    p.write("api.py", BACKEND);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the backend ready", || {
        process(&ps(&p), "api")["state"] == "ready"
    });
    let url = ps(&p)["proxies"][0]["url"].as_str().unwrap().to_owned();
    let addr = url.strip_prefix("http://").unwrap().to_owned();
    (p, addr)
}

fn errors(p: &Project, args: &[&str]) -> Value {
    let mut all = vec!["errors", "--json"];
    all.extend_from_slice(args);
    let r = p.run(&all);
    assert_eq!(r.code(), 0, "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap()
}

fn entries(report: &Value) -> &Vec<Value> {
    report["entries"].as_array().unwrap()
}

/// The incident rooted in the backend's traceback, if listed.
fn traceback_incident(report: &Value) -> Option<&Value> {
    entries(report)
        .iter()
        .find(|e| e["category"] == "python.traceback")
}

/// Asked right after the 500, the answer has the traceback the backend prints only
/// afterwards, with the failed request under it: the question waits (at most a second
/// after the answer) for the error that explains a failure that just happened.
#[test]
fn a_failure_asked_about_at_once_comes_with_its_cause() {
    let (p, addr) = backend_behind_proxy();
    let _down = Down(&p);
    let r = request(&addr, "GET", "/api/stats", &[], "");
    assert_eq!(r.status, 500, "{r:?}");
    let report = errors(&p, &[]);
    let incident = traceback_incident(&report)
        .unwrap_or_else(|| panic!("no traceback in the answer: {report:#}"));
    assert_eq!(incident["source"], "process:api");
    assert_eq!(incident["message"], "KeyError: 'visits'");
    assert_eq!(incident["location"], "api.py:4", "{incident:#}");
    assert_eq!(incident["function"], "total_visits", "{incident:#}");
    assert_eq!(incident["code"], "return stats[\"visits\"]", "{incident:#}");
    let symptoms = incident["symptoms"].as_array().unwrap();
    assert!(
        symptoms.iter().any(|s| s["source"] == "proxy:web"
            && s["message"]
                .as_str()
                .unwrap()
                .starts_with("GET /api/stats → 500")),
        "{incident:#}"
    );
    // The failed request is not listed on its own too.
    assert_eq!(entries(&report).len(), 1, "{report:#}");
}

/// The same request going through later resolves the incident (no restart); failing
/// again after that makes it regressed.
#[test]
fn the_same_request_succeeding_resolves_and_failing_again_regresses() {
    let (p, addr) = backend_behind_proxy();
    let _down = Down(&p);
    assert_eq!(request(&addr, "GET", "/api/stats", &[], "").status, 500);
    assert!(traceback_incident(&errors(&p, &[])).is_some());

    p.write("fixed", "");
    assert_eq!(request(&addr, "GET", "/api/stats", &[], "").status, 200);
    let open = errors(&p, &[]);
    assert!(entries(&open).is_empty(), "{open:#}");
    let resolved = errors(&p, &["--status", "resolved"]);
    let incident = traceback_incident(&resolved).unwrap_or_else(|| panic!("{resolved:#}"));
    assert_eq!(incident["state"], "resolved");
    assert_eq!(incident["fix"]["kind"], "request_ok", "{incident:#}");

    std::fs::remove_file(p.dir.join("fixed")).unwrap();
    assert_eq!(request(&addr, "GET", "/api/stats", &[], "").status, 500);
    let again = errors(&p, &[]);
    let incident = traceback_incident(&again).unwrap_or_else(|| panic!("{again:#}"));
    assert_eq!(incident["state"], "regressed", "{incident:#}");
    assert_eq!(incident["fix"]["kind"], "request_ok");
}

/// A dev server's own reload resolves what it printed before, with no restart: the
/// process prints a traceback, then (once told to) uvicorn's reload lines.
#[test]
fn a_dev_servers_own_reload_resolves_its_errors() {
    let p = Project::new(
        "[processes.app]\ncommand = \"printf 'Traceback (most recent call last):\\\\n  File \\\"%s/app.py\\\", line 3, in <module>\\\\nValueError: bad port\\\\n' \\\"$PWD\\\" >&2; while [ ! -e reload ]; do sleep 0.05; done; printf 'WARNING:  WatchFiles detected changes in '\\\\''app.py'\\\\''. Reloading...\\\\nINFO:     Started server process [42]\\\\nINFO:     Waiting for application startup.\\\\nINFO:     Application startup complete.\\\\n' >&2; exec sleep 1000\"\n",
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the traceback", || {
        p.run(&["errors"]).stdout().contains("bad port")
    });
    let pid = process(&ps(&p), "app")["pid"].clone();
    p.write("reload", "");
    // Resolved once the reload's grace (2 s) is over with nothing recurring.
    wait_until("resolved by the reload", || {
        let report = errors(&p, &["--status", "resolved"]);
        entries(&report)
            .iter()
            .any(|e| e["message"] == "ValueError: bad port" && e["fix"]["kind"] == "reloaded")
    });
    let report = errors(&p, &["--status", "resolved"]);
    let e = &entries(&report)[0];
    assert_eq!(e["fix"]["why"], "reloaded (uvicorn)", "{e:#}");
    assert!(entries(&errors(&p, &[])).is_empty());
    // Corral restarted nothing.
    assert_eq!(process(&ps(&p), "app")["pid"], pid);
}

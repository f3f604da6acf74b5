//! The dashboard: the human's live view of the project, in the browser, served by the
//! daemon on its HTTP listener under `/dashboard` (the same hyper server as `/mcp`).
//!
//! - Access ([`access`]): `corral dashboard` gets a one-time login secret over the
//!   control socket; the login page trades it for a session cookie. Every other URL
//!   needs that cookie; every change needs the page's own origin and its CSRF token.
//!   Every response carries a strict Content-Security-Policy (the page's own scripts
//!   and styles only, nothing inline, no frames, no other origins).
//! - The page ([`assets`]): static files embedded in the binary.
//! - Its data: one event stream for the overview, the errors and the journal, a stream
//!   per log or proxy it shows ([`streams`]), and requests that go through the same
//!   handlers as the CLI's control requests (`control::servers`, `control::proxies`, …).
//!
//! | path | what |
//! |---|---|
//! | `GET /dashboard/login`, `POST /dashboard/login` | the login page; the secret's exchange |
//! | `GET /dashboard/` | the app (its CSRF token in a `<meta>`) |
//! | `GET /dashboard/{app.js,app.css,login.js,favicon.svg}` | its files |
//! | `GET /dashboard/api/stream` | SSE: `overview`, `errors`, `journal` |
//! | `GET /dashboard/api/logs?unit=&lines=` | SSE: `lines` of one unit's log |
//! | `GET /dashboard/api/traffic?proxy=&limit=` | SSE: `traffic` of one proxy |
//! | `GET /dashboard/api/tools`, `GET /dashboard/api/errors?status=` | JSON |
//! | `POST /dashboard/api/{call,action,logout}` | JSON |

pub(crate) mod access;
pub(crate) mod assets;
mod streams;

pub use assets::transferred_size;

use crate::control::State;
use crate::protocol::Reply;
use access::{Purpose, Seen, Session};
use bytes::Bytes;
use corral_gateway::httpd::{Body, escape_html};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

type Request = hyper::Request<Incoming>;
type Response = hyper::Response<Body>;

/// The policy of every response: the page's own files only; no inline script or style,
/// no plugins, no frames, no form posts, nothing fetched from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Largest POST body (a tool call's arguments).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// The answer to `corral dashboard`: the dashboard's URL with a fresh login secret, and
/// the launch page (`.corral/dashboard.html`, 0600) that leads a browser to it. The
/// browser is given the page's path, not the URL: a process's arguments are readable
/// by every user of the machine, the page only by its owner.
pub(crate) fn open(state: &State) -> Result<Value, String> {
    let url = login_url(state)?;
    let launch = state.paths.state_dir.join("dashboard.html");
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={0}\"><title>Corral</title></head>\
         <body><a href=\"{0}\">Open the dashboard</a></body></html>\n",
        escape_html(&url)
    );
    crate::lifecycle::write_private(&launch, &page)
        .map_err(|e| format!("cannot write {}: {e}", launch.display()))?;
    Ok(json!({ "url": url, "launch": launch }))
}

/// The dashboard's URL with a fresh login secret, or why there is none.
fn login_url(state: &State) -> Result<String, String> {
    let Some(http) = &state.http else {
        return Err(format!(
            "the daemon's HTTP endpoint is not listening ({}), and the dashboard is served there",
            state.info.http_error.as_deref().unwrap_or("no address")
        ));
    };
    let addr = http.local_addr();
    let host = if addr.ip().is_unspecified() || addr.ip().is_loopback() {
        format!("127.0.0.1:{}", addr.port())
    } else {
        addr.to_string()
    };
    Ok(format!(
        "http://{host}/dashboard/login#{}",
        state.dashboard.new_login()
    ))
}

/// Mounts the dashboard on the daemon's HTTP listener, if it has one.
pub(crate) fn mount(state: &Arc<State>) {
    if let Some(http) = &state.http {
        http.mount(
            "/dashboard",
            Arc::new(Dashboard {
                state: Arc::downgrade(state),
            }),
        );
    }
}

struct Dashboard {
    /// Weak: the state owns the HTTP gateway that owns this.
    state: Weak<State>,
}

impl corral_gateway::http::Mount for Dashboard {
    fn handle(
        &self,
        req: Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'static>> {
        let state = self.state.upgrade();
        Box::pin(async move {
            let Some(state) = state else {
                return text(503, "the daemon is stopping\n");
            };
            secured(route(state, req).await)
        })
    }
}

fn header(req: &Request, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn route(state: Arc<State>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let purpose = match (&method, path.as_str()) {
        (&Method::GET | &Method::HEAD, "/dashboard/login") => Purpose::Login,
        (&Method::GET | &Method::HEAD, "/dashboard" | "/dashboard/") => Purpose::Page,
        (&Method::GET | &Method::HEAD, _) => Purpose::Subresource,
        (&Method::POST, _) => Purpose::Change,
        _ => return text(405, "the dashboard answers GET and POST\n"),
    };
    let seen = Seen {
        host: header(&req, header::HOST),
        origin: header(&req, header::ORIGIN),
        fetch_site: req
            .headers()
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok()),
        content_type: header(&req, header::CONTENT_TYPE),
    };
    if let Err(why) = access::check(purpose, seen) {
        return refused(403, &path, &why);
    }
    // The only URLs that work without a session: the login page and what it loads.
    match (&method, path.as_str()) {
        (&Method::GET | &Method::HEAD, "/dashboard/login") => {
            return page(&req, assets::LOGIN.to_owned());
        }
        (&Method::GET | &Method::HEAD, "/dashboard/login.js" | "/dashboard/favicon.svg") => {
            return asset(&req, &path);
        }
        (&Method::POST, "/dashboard/login") => return login(&state, req).await,
        _ => {}
    }
    let cookies = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let Some(session) = state.dashboard.session(cookies) else {
        return refused(
            401,
            &path,
            "no dashboard session: open the dashboard with `corral dashboard`",
        );
    };
    if purpose == Purpose::Change {
        let given = req
            .headers()
            .get("x-corral-csrf")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if !corral_gateway::httpd::constant_time_eq(given, session.csrf.as_bytes()) {
            return refused(
                403,
                &path,
                "missing or wrong X-Corral-CSRF token: changes come only from the dashboard's page",
            );
        }
    }
    let query = req.uri().query().unwrap_or("").to_owned();
    match (&method, path.as_str()) {
        (_, "/dashboard") => redirect("/dashboard/"),
        (_, "/dashboard/") => index(&state, &session, &req),
        (&Method::GET | &Method::HEAD, "/dashboard/api/stream") => streams::main(state),
        (&Method::GET | &Method::HEAD, "/dashboard/api/logs") => {
            let unit = param(&query, "unit").unwrap_or_default();
            let lines = param(&query, "lines")
                .and_then(|n| n.parse().ok())
                .unwrap_or(2000usize)
                .min(10_000);
            streams::logs(state, unit, lines)
        }
        (&Method::GET | &Method::HEAD, "/dashboard/api/traffic") => {
            let proxy = param(&query, "proxy").unwrap_or_default();
            let limit = param(&query, "limit")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1000usize)
                .clamp(1, 1000);
            streams::traffic(state, proxy, limit)
        }
        (&Method::GET | &Method::HEAD, "/dashboard/api/tools") => {
            let reply = crate::control::servers::tools(&state, None).await;
            match reply.ok {
                true => json_response(200, &reply.data),
                false => json_response(500, &reply_json(reply)),
            }
        }
        (&Method::GET | &Method::HEAD, "/dashboard/api/errors") => {
            let status = param(&query, "status").unwrap_or_else(|| "all".to_owned());
            match crate::control::daemon::errors_report(&state, &json!({ "status": status }), None)
                .await
            {
                Ok((report, raw)) => json_response(200, &report.json(raw)),
                Err(e) => json_response(400, &json!({ "error": e })),
            }
        }
        (&Method::POST, "/dashboard/api/call") => match body_json(req).await {
            Ok(body) => call(&state, body).await,
            Err(r) => r,
        },
        (&Method::POST, "/dashboard/api/action") => match body_json(req).await {
            Ok(body) if body["action"] == "authorize" => {
                let name = body["name"].as_str().unwrap_or("").to_owned();
                json_response(200, &reply_json(authorize(state, name).await))
            }
            Ok(body) => action(&state, body).await,
            Err(r) => r,
        },
        (&Method::POST, "/dashboard/api/logout") => {
            let cookies = req
                .headers()
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok());
            state.dashboard.logout(cookies);
            let mut r = json_response(200, &json!({ "ok": true }));
            set_header(&mut r, header::SET_COOKIE, &access::cleared_cookie());
            r
        }
        (&Method::GET | &Method::HEAD, _) => asset(&req, &path),
        _ => refused(404, &path, "no such dashboard request"),
    }
}

/// `POST /dashboard/login` `{"secret": …}`: a session for a good secret, once.
async fn login(state: &State, req: Request) -> Response {
    let body = match body_json(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let secret = body["secret"].as_str().unwrap_or("");
    let Some((id, _csrf)) = state.dashboard.redeem(secret) else {
        return json_response(
            403,
            &json!({
                "error": "this login link was used already or has expired (links work once, for 5 \
                          minutes): run `corral dashboard` for a new one"
            }),
        );
    };
    let mut r = empty(204);
    set_header(&mut r, header::SET_COOKIE, &access::session_cookie(&id));
    r
}

fn index(state: &State, session: &Session, req: &Request) -> Response {
    let project = {
        let config = state.config.read().unwrap();
        config
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| config.root.display().to_string())
    };
    page(
        req,
        assets::INDEX
            .replace("{{CSRF}}", &session.csrf)
            .replace("{{PROJECT}}", &escape_html(&project)),
    )
}

/// `POST /dashboard/api/call` `{"tool", "arguments"}`: the tool's result and how long it
/// took, through `corral call`'s handler.
async fn call(state: &State, body: Value) -> Response {
    let Some(tool) = body["tool"].as_str() else {
        return json_response(
            400,
            &json!({"ok": false, "error": "`tool` (a string) is missing"}),
        );
    };
    let arguments = match &body["arguments"] {
        Value::Null => json!({}),
        Value::Object(_) => body["arguments"].clone(),
        _ => {
            return json_response(
                400,
                &json!({"ok": false, "error": "`arguments` must be an object"}),
            );
        }
    };
    let started = Instant::now();
    let reply = crate::control::servers::call(state, None, tool.to_owned(), arguments).await;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut answer = reply_json(reply);
    answer["elapsed_ms"] = json!((elapsed_ms * 10.0).round() / 10.0);
    json_response(200, &answer)
}

/// `POST /dashboard/api/action` `{"action", "name"}`: start, stop or restart a unit,
/// start or stop a proxy, through the CLI's handlers.
async fn action(state: &State, body: Value) -> Response {
    let name = body["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty() {
        return json_response(400, &json!({"ok": false, "error": "`name` is missing"}));
    }
    use crate::control::{proxies, servers};
    let reply = match body["action"].as_str().unwrap_or("") {
        "start" => servers::start(state, &name).await,
        "stop" => servers::stop(state, &name).await,
        "restart" => servers::restart(state, &name).await,
        "proxy_start" => {
            let req = proxies::StartRequest {
                name,
                ..Default::default()
            };
            proxies::start(state, req).await
        }
        "proxy_stop" => proxies::stop(state, &name).await,
        other => {
            return json_response(
                400,
                &json!({"ok": false, "error": format!(
                    "unknown action {other:?}: start, stop, restart, proxy_start or proxy_stop"
                )}),
            );
        }
    };
    json_response(200, &reply_json(reply))
}

/// How long the dashboard's authorization waits for the user.
const AUTHORIZE_WAIT: Duration = Duration::from_secs(600);

/// The `authorize` action: `corral auth NAME`'s flow run by the daemon. Answers with
/// the authorization URL for the page to open; once the user grants access, the server
/// is restarted with its new credentials, as `corral auth` restarts it.
async fn authorize(state: Arc<State>, name: String) -> Reply {
    use corral_remote::oauth::flow;
    let target = {
        let config = state.config.read().unwrap();
        let Some(server) = config.servers.get(&name) else {
            return crate::control::unknown(&state, &name);
        };
        let Some(target) = flow::Target::of(&config.root, &name, server) else {
            return Reply::usage(format!(
                "server '{name}' is a stdio server: only remote (url) servers use OAuth"
            ));
        };
        target
    };
    let (url_tx, url_rx) = tokio::sync::oneshot::channel();
    let opts = flow::Options {
        open_browser: false,
        timeout: AUTHORIZE_WAIT,
        paste: false,
        url_to: Some(url_tx),
    };
    let login = tokio::spawn(async move { flow::login(&target, opts, &mut std::io::sink()).await });
    match url_rx.await {
        Ok(url) => {
            tokio::spawn(async move {
                if let Ok(Ok(_)) = login.await {
                    crate::control::servers::restart(&state, &name).await;
                }
            });
            Reply::ok(json!({ "url": url }))
        }
        Err(_) => match login.await {
            Ok(Err(e)) => Reply::err(format!("server '{name}': {e}")),
            _ => Reply::err(format!("server '{name}': the authorization did not start")),
        },
    }
}

/// A control reply as the page reads it: `{"ok": true, "result": …}` or
/// `{"ok": false, "error": …}`.
fn reply_json(reply: Reply) -> Value {
    if reply.ok {
        json!({"ok": true, "result": reply.data})
    } else {
        json!({"ok": false, "error": reply.error.unwrap_or_default()})
    }
}

async fn body_json(req: Request) -> Result<Value, Response> {
    let bytes =
        corral_gateway::httpd::read_body(req.into_body(), MAX_BODY, Duration::from_secs(30))
            .await
            .map_err(|e| {
                json_response(400, &json!({"ok": false, "error": format!("body: {e:?}")}))
            })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        json_response(
            400,
            &json!({"ok": false, "error": format!("the body is not JSON: {e}")}),
        )
    })
}

/// A query parameter, percent-decoded.
fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push((hi * 16 + lo) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn asset(req: &Request, path: &str) -> Response {
    let Some(a) = assets::find(path) else {
        return refused(404, path, "no such dashboard file");
    };
    if header(req, header::IF_NONE_MATCH) == Some(a.etag()) {
        let mut r = empty(304);
        set_header(&mut r, header::ETAG, a.etag());
        return r;
    }
    let mut r = if accepts_gzip(req) {
        let mut r = full(200, a.content_type, Bytes::from_static(a.gzip()));
        set_header(&mut r, header::CONTENT_ENCODING, "gzip");
        r
    } else {
        full(200, a.content_type, Bytes::from_static(a.bytes))
    };
    set_header(&mut r, header::ETAG, a.etag());
    set_header(&mut r, header::VARY, "Accept-Encoding");
    set_header(&mut r, header::CACHE_CONTROL, "no-cache");
    r
}

fn full(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Response {
    let mut r = hyper::Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn empty(status: u16) -> Response {
    let mut r = hyper::Response::new(Body::full(Bytes::new()));
    *r.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    r
}

fn text(status: u16, body: &'static str) -> Response {
    full(status, "text/plain; charset=utf-8", body)
}

fn accepts_gzip(req: &Request) -> bool {
    header(req, header::ACCEPT_ENCODING).is_some_and(|v| {
        v.split(',')
            .any(|c| c.split(';').next().is_some_and(|c| c.trim() == "gzip"))
    })
}

/// One of the two HTML pages, compressed when the browser takes gzip (the app's page
/// holds the session's token, so it is compressed per request: 9 KB, well under 1 ms).
fn page(req: &Request, body: String) -> Response {
    if !accepts_gzip(req) {
        return html(body);
    }
    let mut r = full(
        200,
        "text/html; charset=utf-8",
        assets::gzip(body.as_bytes()),
    );
    set_header(&mut r, header::CONTENT_ENCODING, "gzip");
    set_header(&mut r, header::VARY, "Accept-Encoding");
    set_header(&mut r, header::CACHE_CONTROL, "no-store");
    r
}

fn html(body: String) -> Response {
    let mut r = full(200, "text/html; charset=utf-8", body);
    set_header(&mut r, header::CACHE_CONTROL, "no-store");
    r
}

fn json_response(status: u16, value: &Value) -> Response {
    let mut r = full(status, "application/json", value.to_string());
    set_header(&mut r, header::CACHE_CONTROL, "no-store");
    r
}

fn redirect(to: &'static str) -> Response {
    let mut r = empty(308);
    set_header(&mut r, header::LOCATION, to);
    r
}

/// A refusal: JSON for the API, a short page for the rest. It says why and what to do,
/// and nothing of the project.
fn refused(status: u16, path: &str, why: &str) -> Response {
    if path.starts_with("/dashboard/api/") || path == "/dashboard/login" {
        return json_response(status, &json!({ "ok": false, "error": why }));
    }
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Corral</title></head>\
         <body><p>{}</p></body></html>",
        escape_html(why)
    );
    let mut r = html(page);
    *r.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    r
}

fn set_header(r: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

/// The headers every dashboard response carries.
fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_decoded() {
        assert_eq!(param("unit=web%20app&lines=5", "unit").unwrap(), "web app");
        assert_eq!(param("unit=a+b", "unit").unwrap(), "a b");
        assert_eq!(param("unit=%zz", "unit").unwrap(), "%zz");
        assert_eq!(param("unit=%4", "unit").unwrap(), "%4");
        assert_eq!(param("unit=%é%41", "unit").unwrap(), "%éA");
        assert_eq!(param("lines=5", "unit"), None);
    }
}

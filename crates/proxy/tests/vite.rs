//! The dev proxy in front of the real Vite dev server: the page, its modules and Vite's
//! hot-module-replacement websocket all pass through, and an edit in the project reaches
//! the client as an HMR message, and in Chromium as a changed page.
//!
//! The project is tests/e2e/vite-app copied into a temp dir (it is edited). Vite's file
//! watcher may still be starting when the test first edits, so an edit that brings no
//! message within a few seconds is made again (with new content) until the deadline.

mod common;
mod e2e;

use common::get;
use corral_events::EventBus;
use corral_proxy::browser::{BrowserEntry, BrowserQuery};
use corral_proxy::traffic::TrafficQuery;
use corral_proxy::{Proxy, ProxySpec};
use e2e::chromium::Chromium;
use e2e::proc::{TempDir, copy_tree};
use e2e::vite::Vite;
use e2e::{DEADLINE, fixtures};
use futures_util::StreamExt;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// How long one edit may go unanswered before it is made again.
const EDIT_WINDOW: Duration = Duration::from_secs(5);

/// A fresh copy of the fixture project.
fn project() -> TempDir {
    let dir = TempDir::new("vite-app");
    copy_tree(&fixtures().join("vite-app"), dir.path());
    dir
}

/// Vite, and a proxy in front of it.
async fn vite_behind_proxy(project: &Path) -> (Vite, Proxy, EventBus) {
    let vite = Vite::start(project).await;
    let bus = EventBus::new(1024);
    let proxy = Proxy::start(ProxySpec::new("web", &vite.url, "127.0.0.1:0"), bus.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (vite, proxy, bus)
}

/// Headless Chromium on the proxy's front page (a failure says what Chromium and Vite
/// printed).
async fn open_in_chromium(proxy: &Proxy, vite: &Vite) -> (Chromium, e2e::cdp::Page) {
    let chromium = Chromium::launch().await;
    let page = chromium.page().await;
    page.navigate(&format!("{}/", proxy.url()), DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", chromium.stderr_tail(), vite.output()));
    (chromium, page)
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON message on `ws`, or `None` at `until`; fails when the socket ends.
async fn next_json(ws: &mut Ws, until: Instant) -> Option<Value> {
    loop {
        let msg = match tokio::time::timeout_at(until, ws.next()).await {
            Err(_) => return None,
            Ok(None) => panic!("the HMR websocket ended"),
            Ok(Some(Err(e))) => panic!("the HMR websocket failed: {e}"),
            Ok(Some(Ok(msg))) => msg,
        };
        if let Message::Text(text) = msg {
            return Some(
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("HMR message {text}: {e}")),
            );
        }
    }
}

/// Writes `file` (a new `content(n)` for the n-th try) until an HMR message that `want`
/// picks arrives, and returns it; messages it does not pick are skipped.
async fn edit_until(
    ws: &mut Ws,
    file: &Path,
    content: impl Fn(u32) -> String,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + DEADLINE;
    let mut skipped = Vec::new();
    for n in 1.. {
        std::fs::write(file, content(n)).unwrap();
        let window = (Instant::now() + EDIT_WINDOW).min(end);
        while let Some(msg) = next_json(ws, window).await {
            if want(&msg) {
                return msg;
            }
            skipped.push(msg);
        }
        assert!(
            Instant::now() < end,
            "no such HMR message for edits of {} within {DEADLINE:?}; got: {skipped:?}",
            file.display()
        );
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hmr_messages_pass_through_the_proxy() {
    let project = project();
    let (vite, proxy, _bus) = vite_behind_proxy(project.path()).await;
    let base = proxy.url();

    // The page: Vite's document, with Vite's client and Corral's script both in it.
    let page = get(proxy.addr(), "/").await;
    assert_eq!(page.status, 200, "{}\n{}", page.text(), vite.output());
    assert!(
        page.text()
            .contains(r#"<script type="module" src="/@vite/client"></script>"#),
        "Vite's client is missing from the page:\n{}",
        page.text()
    );
    assert!(
        page.text().contains(&format!(
            r#"<script src="/__corral/client.js" data-k="{}"></script>"#,
            proxy.report_key()
        )),
        "Corral's script is missing from the page:\n{}",
        page.text()
    );
    assert!(page.text().contains(r#"src="/main.js""#), "{}", page.text());

    // What the browser loads next, which puts the modules in Vite's module graph (an edit
    // of a module no client has loaded sends nothing).
    let client = get(proxy.addr(), "/@vite/client").await;
    assert_eq!(client.status, 200, "{}", client.text());
    let token = client
        .text()
        .split_once("const wsToken = \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(token, _)| token.to_owned())
        .unwrap_or_else(|| panic!("no wsToken in /@vite/client"));
    let main = get(proxy.addr(), "/main.js").await;
    assert_eq!(main.status, 200, "{}", main.text());
    assert!(
        main.text().contains(r#"import "/style.css""#),
        "{}",
        main.text()
    );
    let css = get(proxy.addr(), "/style.css").await;
    assert_eq!(css.status, 200, "{}", css.text());
    assert!(css.text().contains("rgb(255, 0, 0)"), "{}", css.text());

    // The HMR socket, opened as Vite's client opens it from a page on the proxy's origin:
    // the `vite-hmr` subprotocol, the page's Origin, and the token (Vite refuses a
    // browser's socket without it).
    let mut req = format!("ws://{}/?token={token}", proxy.addr())
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "vite-hmr".parse().unwrap());
    req.headers_mut().insert("origin", base.parse().unwrap());
    let (mut ws, response) = tokio::time::timeout(DEADLINE, tokio_tungstenite::connect_async(req))
        .await
        .expect("the HMR websocket handshake timed out")
        .unwrap_or_else(|e| {
            panic!(
                "the HMR websocket through the proxy: {e}\n{}",
                vite.output()
            )
        });
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "vite-hmr",
        "the subprotocol came back"
    );
    let connected = next_json(&mut ws, Instant::now() + DEADLINE)
        .await
        .expect("no first HMR message");
    assert_eq!(connected["type"], "connected", "{connected}");

    // A style edit is a hot update of that module, no reload.
    let style = project.path().join("style.css");
    let update = edit_until(
        &mut ws,
        &style,
        |n| format!("#app {{\n  color: rgb(0, {n}, 0);\n}}\n"),
        |m| m["type"] == "update",
    )
    .await;
    let updates = update["updates"].as_array().expect("updates");
    assert!(
        updates.iter().any(|u| u["path"] == "/style.css"),
        "the update is not of /style.css: {update}"
    );
    // And the module it names, fetched again as the client does, is the edited one.
    let stamp = &updates[0]["timestamp"];
    let css = get(proxy.addr(), &format!("/style.css?t={stamp}")).await;
    assert!(css.text().contains("color: rgb(0, "), "{}", css.text());

    // An edit of the entry module, which accepts no updates, reloads the page.
    let main_js = project.path().join("main.js");
    let reload = edit_until(
        &mut ws,
        &main_js,
        |n| {
            format!(
                "import \"./style.css\";\n\ndocument.getElementById(\"app\").textContent = \
                 \"version {}\";\n",
                n + 1
            )
        },
        |m| m["type"] == "full-reload",
    )
    .await;
    assert_eq!(reload["type"], "full-reload", "{reload}");

    // Stopping the proxy ends the spliced socket too.
    proxy.stop().await;
    let closed = tokio::time::timeout(DEADLINE, async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the HMR websocket outlived the proxy");
    vite.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vite_page_in_chromium_updates_through_the_proxy() {
    let project = project();
    let (vite, proxy, _bus) = vite_behind_proxy(project.path()).await;
    let (chromium, page) = open_in_chromium(&proxy, &vite).await;
    let app = "document.getElementById('app')";
    page.wait_until(&format!("{app}.textContent"), &"version 1".into(), DEADLINE)
        .await
        .unwrap();
    // A mark a reload would wipe: the style edit must be applied in place.
    page.evaluate(
        "window.__corralMark = 'kept'; getComputedStyle(document.getElementById('app')).color",
    )
    .await
    .map(|color| assert_eq!(color, "rgb(255, 0, 0)"))
    .unwrap();

    let style = project.path().join("style.css");
    let styled = format!("getComputedStyle({app}).color + ' ' + window.__corralMark");
    let mut n = 0;
    let end = Instant::now() + DEADLINE;
    loop {
        n += 1;
        std::fs::write(&style, format!("#app {{\n  color: rgb(0, 0, {n});\n}}\n")).unwrap();
        let want = Value::from(format!("rgb(0, 0, {n}) kept"));
        match page.wait_until(&styled, &want, EDIT_WINDOW).await {
            Ok(()) => break,
            Err(e) if Instant::now() >= end => panic!("the style edit never showed: {e}"),
            Err(_) => {}
        }
    }

    let main_js = project.path().join("main.js");
    let end = Instant::now() + DEADLINE;
    for n in 2.. {
        std::fs::write(
            &main_js,
            format!(
                "import \"./style.css\";\n\ndocument.getElementById(\"app\").textContent = \
                 \"version {n}\";\n"
            ),
        )
        .unwrap();
        let want = Value::from(format!("version {n}"));
        match page
            .wait_until(&format!("{app}.textContent"), &want, EDIT_WINDOW)
            .await
        {
            Ok(()) => break,
            Err(e) if Instant::now() >= end => panic!("the script edit never showed: {e}"),
            Err(_) => {}
        }
    }
    // It was a reload: the mark is gone.
    assert_eq!(
        page.evaluate("window.__corralMark === undefined")
            .await
            .unwrap(),
        true
    );

    // Nothing went wrong in the page on the way (Vite's client logs a console.error when
    // its socket fails).
    let errors = proxy.browser().query(&BrowserQuery::default());
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");

    chromium.close().await;
    proxy.stop().await;
    vite.stop().await;
}

/// Vite refuses a request for a host name it does not know (DNS rebinding); through the
/// proxy, which rewrites `Host` to Vite's, the proxy must refuse it instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_host_name_is_refused_through_the_proxy_as_vite_refuses_it() {
    let project = project();
    let (vite, proxy, _bus) = vite_behind_proxy(project.path()).await;
    let port = proxy.addr().port();
    let get_as = |addr: std::net::SocketAddr, host: String| async move {
        let mut conn = common::Conn::open(addr).await;
        let req = hyper::Request::get("/main.js")
            .header("host", host)
            .body(corral_proxy::full(""))
            .unwrap();
        conn.fetch(req).await
    };
    let vite_addr: std::net::SocketAddr = vite
        .url
        .strip_prefix("http://")
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let direct = get_as(vite_addr, format!("evil.example:{}", vite_addr.port())).await;
    assert_eq!(direct.status, 403, "Vite's own check: {}", direct.text());

    let rebound = get_as(proxy.addr(), format!("evil.example:{port}")).await;
    assert_eq!(rebound.status, 403, "{}", rebound.text());
    assert!(!rebound.text().contains("import"), "{}", rebound.text());
    assert!(
        rebound.text().contains("allowed_hosts"),
        "{}",
        rebound.text()
    );

    let local = get_as(proxy.addr(), format!("localhost:{port}")).await;
    assert_eq!(local.status, 200, "{}\n{}", local.text(), vite.output());
    assert!(
        local.text().contains(r#"import "/style.css""#),
        "{}",
        local.text()
    );
    proxy.stop().await;
}

/// The browser log's entries, once one satisfies `until` (or panics with them).
async fn browser_log_until(
    proxy: &Proxy,
    what: &str,
    until: impl Fn(&[BrowserEntry]) -> bool,
) -> Vec<BrowserEntry> {
    let end = Instant::now() + DEADLINE;
    loop {
        let log = proxy.browser().query(&BrowserQuery::default());
        if until(&log) {
            return log;
        }
        assert!(
            Instant::now() < end,
            "no {what} in the browser log within {DEADLINE:?}: {log:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A React-like app on Vite, in Chromium: a component throws while a library pre-bundled
/// into `.vite/deps` renders it from its scheduler, logs React 18's "The above error
/// occurred" with a component stack, and rethrows; the app's fetch gets a 500. Every
/// frame Corral records is mapped through Vite's maps (the app's inline ones, the
/// package's beside its bundle) and shown without the origin or `?v=`/`?t=`; the
/// console.error points at the component, not the library; the failed fetch names the
/// request the proxy logged, whose id the API saw. After an edit, the module comes back
/// as `?t=…` and the frames follow the new lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_like_apps_errors_are_mapped_frame_by_frame_and_tied_to_their_request() {
    let project = TempDir::new("vite-stack");
    copy_tree(&fixtures().join("vite-stack"), project.path());
    copy_tree(
        &fixtures().join("vite-stack/packages/mini-react"),
        &project.path().join("node_modules/mini-react"),
    );
    let (vite, proxy, _bus) = vite_behind_proxy(project.path()).await;
    let (chromium, _page) = open_in_chromium(&proxy, &vite).await;

    let source = std::fs::read_to_string(project.path().join("src/UserList.ts")).unwrap();
    let line = |text: &str| {
        text.lines()
            .position(|l| l.contains("u!.name"))
            .expect("the bug's line") as u32
            + 1
    };
    let bug = line(&source);
    let at_bug = format!("src/UserList.ts:{bug}:");
    let log = browser_log_until(&proxy, "the three errors", |log| {
        ["error", "console.error", "fetch"]
            .iter()
            .all(|k| log.iter().any(|e| e.kind == *k))
    })
    .await;
    let of = |kind: &str| log.iter().find(|e| e.kind == kind).unwrap().clone();
    let context = || format!("{log:#?}\n{}", vite.output());

    // The TypeError: where the component read the missing name, every frame mapped, the
    // package's into its own file under node_modules.
    let error = of("error");
    assert!(
        error
            .message
            .contains("Cannot read properties of null (reading 'name')"),
        "{}",
        context()
    );
    assert!(error.location.starts_with(&at_bug), "{}", context());
    assert!(
        error.stack.contains(&format!("    at UserList ({at_bug}")),
        "{}",
        context()
    );
    assert!(
        error
            .stack
            .contains("    at renderWithHooks (node_modules/mini-react/index.js:"),
        "{}",
        context()
    );
    for entry in &log {
        for shown in [&entry.stack, &entry.message] {
            for gone in ["http://", "?v=", "?t="] {
                assert!(!shown.contains(gone), "{gone} in {shown:?}\n{}", context());
            }
        }
    }

    // React's console.error: called by the library, so located by the component stack in
    // its message, which is mapped too.
    let logged = of("console.error");
    assert!(
        logged.message.starts_with(&format!(
            "The above error occurred in the <UserList> component:\n\n    at UserList ({at_bug}"
        )),
        "{}",
        context()
    );
    assert!(logged.message.contains("\n    at div\n"), "{}", context());
    assert!(logged.location.starts_with(&at_bug), "{}", context());
    assert!(
        logged
            .stack
            .contains("    at logCapturedError (node_modules/mini-react/index.js:"),
        "{}",
        context()
    );

    // The failed fetch names the request in the proxy's log, which the API saw too.
    let traffic = proxy.traffic().query(&TrafficQuery::default());
    let api = traffic
        .iter()
        .find(|t| t.url == "/api/users")
        .unwrap_or_else(|| panic!("{traffic:#?}"));
    assert_eq!(api.status, Some(500));
    let fetch = of("fetch");
    assert_eq!(
        fetch.request.as_deref(),
        Some(api.request_id.as_str()),
        "{}",
        context()
    );
    assert!(
        fetch
            .message
            .contains(&format!(r#""request_id":"{}""#, api.request_id)),
        "{}",
        context()
    );
    assert!(fetch.location.starts_with("src/main.ts:"), "{}", context());
    // The page load, and only it.
    let documents: Vec<&str> = traffic
        .iter()
        .filter(|t| t.document)
        .map(|t| t.url.as_str())
        .collect();
    assert!(
        !documents.is_empty() && documents.iter().all(|u| *u == "/"),
        "{traffic:#?}"
    );

    // An edit moves the bug a line down; Vite's client imports the module again with
    // `?t=`, the component throws again, and its frames follow.
    let file = project.path().join("src/UserList.ts");
    let end = Instant::now() + DEADLINE;
    let moved = format!("src/UserList.ts:{}:", bug + 1);
    for n in 1.. {
        std::fs::write(&file, format!("// edit {n}\n{source}")).unwrap();
        let seen = tokio::time::timeout(
            EDIT_WINDOW,
            browser_log_until(&proxy, "the error after the edit", |log| {
                log.iter()
                    .any(|e| e.kind == "console.error" && e.location.starts_with(&moved))
            }),
        )
        .await;
        if seen.is_ok() {
            break;
        }
        assert!(
            Instant::now() < end,
            "no error after the edit: {}",
            context()
        );
    }
    let after = proxy.browser().query(&BrowserQuery::default());
    let again = after
        .iter()
        .find(|e| e.kind == "console.error" && e.location.starts_with(&moved))
        .unwrap();
    assert!(
        again.message.contains(&format!("    at UserList ({moved}")),
        "{after:#?}"
    );
    let traffic = proxy.traffic().query(&TrafficQuery::default());
    assert!(
        traffic
            .iter()
            .any(|t| t.url.starts_with("/src/UserList.ts?t=")),
        "the module came back with a cache-buster: {traffic:#?}"
    );
    for entry in &after {
        assert!(
            !entry.stack.contains("?t=") && !entry.message.contains("?t="),
            "{entry:#?}"
        );
    }

    chromium.close().await;
    proxy.stop().await;
    vite.stop().await;
}

//! The dashboard in real headless Chromium (Debian's `chromium`, driven over the DevTools
//! protocol): signed in by the link `corral dashboard` prints (once, and never again);
//! each view shows a fixture project's real state and follows it live — a server that
//! crashes, a process that prints, a page behind the proxy that throws —; the restart
//! button restarts, the tool form calls a tool; a server printing `<script>` and terminal
//! escapes is shown as text; and a page of another origin on the same host (the same
//! site, so the session cookie goes with its requests) can neither act nor read.
//!
//! The page is driven through the hooks it keeps for this: views by `location.hash`,
//! `data-name`/`data-state` on rows, `data-action` on buttons, `#log-lines .log-line`,
//! `.incident`, `.traffic-row`, `.tool`, `#tool-form`, `.event-row`.

mod common;
#[path = "../../proxy/tests/e2e/mod.rs"]
mod e2e;

use common::*;
use e2e::cdp::Page;
use e2e::chromium::Chromium;
use serde_json::{Value, json};
use std::time::Duration;

/// How long one step may take on a loaded machine.
const STEP: Duration = e2e::DEADLINE;

/// What the fixture server prints to stderr at start: markup and terminal escapes
/// (a colour, a window title, a cursor move) that must reach the page as text.
const HOSTILE: &str = r#"<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> \u001b[31mred words\u001b[0m \u001b]0;retitled\u0007\u001b[2J end"#;

/// A tiny web server on a free loopback port serving `pages` (path → HTML).
fn serve(pages: &'static [(&'static str, &'static str)]) -> String {
    common::http::serve(move |path| match pages.iter().find(|(p, _)| *p == path) {
        Some((_, body)) => ("200 OK", "text/html", (*body).to_owned()),
        None => ("404 Not Found", "text/plain", "no such page".to_owned()),
    })
}

/// The app behind the proxy: its page throws.
static APP: &[(&str, &str)] = &[(
    "/",
    "<!doctype html><html><head><title>app</title></head><body>app\
     <script>throw new Error('boom from the page')</script></body></html>",
)];

fn project(app: &str) -> Project {
    let p = Project::new(&format!(
        r#"
[servers.fx]
command = "{{fixture}}"
args = ["--banner", "{HOSTILE}"]

[processes.printer]
command = "sh -c 'echo printer started; while [ ! -f go ]; do sleep 0.1; done; echo printed-after-go; exec sleep 600'"

[proxies.app]
target = "http://{app}"
"#
    ));
    let run = p.run(&["up", "-d"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    wait_until("fx ready", || ps_row(&p, "fx")["state"] == "ready");
    p
}

/// Opens a tab on the project's login link (`corral dashboard --no-browser`) and waits
/// for the app, its live feed open; the tab and the (now used) link.
async fn sign_in(browser: &Chromium, p: &Project) -> (Page, String) {
    let page = browser.page().await;
    let link = dashboard_link(p);
    page.navigate(&link, STEP).await.unwrap();
    page.wait_until("location.pathname", &json!("/dashboard/"), STEP)
        .await
        .unwrap();
    page.wait_until("document.body.dataset.stream", &json!("open"), STEP)
        .await
        .unwrap();
    // The secret is gone from the address bar and the history entry.
    let href = page.evaluate("location.href").await.unwrap();
    assert!(!href.as_str().unwrap().contains('#'), "{href}");
    (page, link)
}

/// Shows `view` in `page`, brought to the front (a background tab gets no animation
/// frames, which the page renders in).
async fn show(page: &Page, view: &str) {
    page.call("Page.bringToFront", json!({})).await.unwrap();
    page.evaluate(&format!("location.hash = {}", json!(view)))
        .await
        .unwrap();
}

/// Waits until `expression` is true in the page; on failure, says what the page shows.
async fn until(page: &Page, what: &str, expression: &str) {
    if let Err(e) = page.wait_until(expression, &json!(true), STEP).await {
        let shown = page
            .evaluate(
                "location.href + '\\n' + JSON.stringify(document.getElementById('log-lines')?.dataset) \
                 + '\\n' + document.body.innerText.slice(0, 3000)",
            )
            .await;
        panic!("{what}: {e}\nthe page shows: {}", shown.unwrap_or_default());
    }
}

fn row(name: &str) -> String {
    format!("document.querySelector('#view-overview [data-name=\"{name}\"]')")
}

fn pid(p: &Project) -> u64 {
    ps_row(p, "fx")["pid"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_view_shows_the_project_and_follows_it_live() {
    let app = serve(APP);
    let p = project(&app);
    let _down = Down(&p);
    let browser = Chromium::launch().await;
    let (page, link) = sign_in(&browser, &p).await;

    // The link works once: another tab (same browser) is refused with it.
    let again = browser.page().await;
    again.navigate(&link, STEP).await.unwrap();
    until(
        &again,
        "the used link refused",
        "document.body.innerText.includes('used already')",
    )
    .await;

    // Overview: every unit with its state.
    show(&page, "#overview").await;
    until(
        &page,
        "fx ready",
        &format!("{}?.dataset.state === 'ready'", row("fx")),
    )
    .await;
    until(
        &page,
        "the printer listed",
        &format!("!!{}", row("printer")),
    )
    .await;
    until(&page, "the proxy listed", &format!("!!{}", row("app"))).await;

    // The restart button restarts, and the overview shows the new pid.
    let before = pid(&p);
    page.evaluate(
        "document.querySelector('#view-overview [data-action=\"restart\"][data-name=\"fx\"]').click()",
    )
    .await
    .unwrap();
    let mut after = before;
    wait_until_within("fx restarted", STEP, || {
        after = pid(&p);
        after != before
    });
    until(
        &page,
        "the new pid shown",
        &format!("{}?.innerText.includes('{after}')", row("fx")),
    )
    .await;

    // A crash shows up live: in the overview and as an incident.
    let crashed = p.run(&["call", "fx", "crash"]);
    assert_ne!(crashed.code(), 0, "{crashed:?}");
    show(&page, "#errors").await;
    until(
        &page,
        "the crash as an incident",
        "[...document.querySelectorAll('.incident')].some(e => e.innerText.includes('server:fx'))",
    )
    .await;

    // "logs around it": the crash's log, where the crashed run ended (its message, "exited
    // with code 3", is Corral's, not a line of the log).
    page.evaluate(
        "[...document.querySelectorAll('.incident')].find(e => e.innerText.includes('server:fx')).querySelector('.logs-link').click()",
    )
    .await
    .unwrap();
    until(
        &page,
        "the crash's line in its log",
        "location.hash.startsWith('#logs/fx') && \
         !!document.querySelector('#log-lines .log-line.target')?.innerText.includes('crashing in the middle of a call')",
    )
    .await;

    // Logs: a process's new line arrives while the view is open.
    show(&page, "#logs/printer").await;
    until(
        &page,
        "the printer's first line",
        "document.getElementById('log-lines')?.innerText.includes('printer started')",
    )
    .await;
    std::fs::write(p.dir.join("go"), "").unwrap();
    until(
        &page,
        "the printer's new line",
        "document.getElementById('log-lines')?.innerText.includes('printed-after-go')",
    )
    .await;

    // Hostile output is text: the markup is shown, nothing ran, no escape is left.
    show(&page, "#logs/fx").await;
    until(
        &page,
        "the banner shown as text",
        "document.getElementById('log-lines')?.innerText.includes('<script>window.__pwned=1</script>')",
    )
    .await;
    let checks = page
        .evaluate(
            "(() => { const l = document.getElementById('log-lines'); return {
                pwned: window.__pwned ?? null,
                scripts: l.querySelectorAll('script, img').length,
                escapes: l.textContent.includes('\\u001b') || l.textContent.includes('\\u0007'),
                title: document.title.includes('retitled'),
                red: [...l.querySelectorAll('span')].some(s => s.textContent.includes('red words') && s.className !== ''),
            }; })()",
        )
        .await
        .unwrap();
    assert_eq!(
        checks,
        json!({"pwned": null, "scripts": 0, "escapes": false, "title": false, "red": true}),
        "{}",
        browser.stderr_tail()
    );

    // A page behind the proxy throws: its error arrives, and its request is in traffic.
    let proxy_url = ps(&p)["proxies"][0]["url"].as_str().unwrap().to_owned();
    let app_page = browser.page().await;
    app_page
        .navigate(&format!("{proxy_url}/"), STEP)
        .await
        .unwrap();
    show(&page, "#errors").await;
    until(
        &page,
        "the page's error as an incident",
        "[...document.querySelectorAll('.incident')].some(e => e.innerText.includes('boom from the page'))",
    )
    .await;
    show(&page, "#traffic/app").await;
    until(
        &page,
        "the page's request in traffic",
        "[...document.querySelectorAll('.traffic-row')].some(r => r.dataset.status === '200')",
    )
    .await;

    // A proxy stopped from the page stays listed, and starts again from there.
    show(&page, "#overview").await;
    for (action, state) in [("proxy_stop", "stopped"), ("proxy_start", "running")] {
        page.evaluate(&format!(
            "document.querySelector('#view-overview [data-action=\"{action}\"][data-name=\"app\"]').click()"
        ))
        .await
        .unwrap();
        until(
            &page,
            &format!("the proxy {state}"),
            &format!("{}?.dataset.state === '{state}'", row("app")),
        )
        .await;
    }
    assert!(ps(&p)["proxies"][0]["url"].is_string(), "{}", ps(&p));

    // Tools: the form made from echo's schema calls it.
    show(&page, "#tools").await;
    until(
        &page,
        "the echo tool listed",
        "!!document.querySelector('.tool[data-tool=\"echo\"], .tool[data-tool=\"fx__echo\"]')",
    )
    .await;
    page.evaluate(
        "document.querySelector('.tool[data-tool=\"echo\"], .tool[data-tool=\"fx__echo\"]').click()",
    )
    .await
    .unwrap();
    until(
        &page,
        "the form",
        "!!document.querySelector('#tool-form [name=\"text\"]')",
    )
    .await;
    page.evaluate(
        "(() => { const f = document.getElementById('tool-form'); \
           const i = f.querySelector('[name=\"text\"]'); i.value = 'said through the form'; \
           i.dispatchEvent(new Event('input', {bubbles: true})); f.requestSubmit(); })()",
    )
    .await
    .unwrap();
    until(
        &page,
        "the tool's result",
        "document.getElementById('tool-result')?.innerText.includes('said through the form')",
    )
    .await;
    until(
        &page,
        "the time it took",
        "/\\d/.test(document.getElementById('tool-elapsed')?.innerText ?? '')",
    )
    .await;

    // Events: the journal, with the crash.
    show(&page, "#events").await;
    until(
        &page,
        "the crash in the journal",
        "!!document.querySelector('.event-row[data-kind=\"server.crashed\"]')",
    )
    .await;

    browser.close().await;
}

/// The attacker's page, on another port of the same host: it tries to restart `fx`
/// through the dashboard at `DASH` (a form-like no-cors post, a JSON post, which needs a
/// preflight) and to read from it (a fetch, the event stream), and says what happened.
const ATTACK: &str = r#"<!doctype html><html><body><script>
const dash = location.hash.slice(1);
window.results = {};
const body = JSON.stringify({action: "restart", name: "fx"});
(async () => {
  const r = window.results;
  try { await fetch(dash + "/dashboard/api/action", {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body}); r.simple = "sent"; } catch (e) { r.simple = "blocked"; }
  try { const x = await fetch(dash + "/dashboard/api/action", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json", "X-Corral-CSRF": "guess"}, body}); r.json = "read " + x.status; } catch (e) { r.json = "blocked"; }
  try { const x = await fetch(dash + "/dashboard/api/tools", {credentials: "include"}); r.read = "read " + (await x.text()).slice(0, 40); } catch (e) { r.read = "blocked"; }
  try { const x = await fetch(dash + "/dashboard/", {credentials: "include"}); r.page = "read " + (await x.text()).slice(0, 40); } catch (e) { r.page = "blocked"; }
  r.stream = await new Promise(done => { const s = new EventSource(dash + "/dashboard/api/stream", {withCredentials: true}); s.onmessage = s.onopen = () => { s.close(); done("open"); }; s.onerror = () => { s.close(); done("blocked"); }; });
  r.done = true;
})();
</script></body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_can_neither_act_nor_read() {
    static PAGES: &[(&str, &str)] = &[("/", ATTACK)];
    let attacker = serve(PAGES);
    let app = serve(APP);
    let p = project(&app);
    let _down = Down(&p);
    let browser = Chromium::launch().await;
    let (_dashboard, link) = sign_in(&browser, &p).await;
    let dash: String = link.split("/dashboard/").next().unwrap().to_owned();
    let before = pid(&p);
    let journal_before = std::fs::read_to_string(p.dir.join(".corral/events.jsonl")).unwrap();

    // The browser holds the session; the attacker's page runs in the same browser, on
    // the same host (127.0.0.1), another port.
    let evil = browser.page().await;
    evil.navigate(&format!("http://{attacker}/#{dash}"), STEP)
        .await
        .unwrap();
    evil.wait_until("window.results?.done === true", &json!(true), STEP)
        .await
        .unwrap();
    let results = evil.evaluate("window.results").await.unwrap();
    // The no-cors post goes out (with the cookie: the same site); its opaque answer is
    // withheld too (`Cross-Origin-Resource-Policy: same-origin`).
    assert_eq!(
        results,
        json!({"simple": "blocked", "json": "blocked", "read": "blocked", "page": "blocked",
               "stream": "blocked", "done": true}),
    );
    // The daemon refused the post.
    assert_eq!(pid(&p), before, "the attacker's page restarted fx");
    let journal = std::fs::read_to_string(p.dir.join(".corral/events.jsonl")).unwrap();
    let new: Vec<Value> = journal[journal_before.len()..]
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        !new.iter()
            .any(|e| e["source"] == "server:fx" && e["kind"] == "server.starting"),
        "{new:#?}"
    );
    browser.close().await;
}

//! The figures: cold loads (first overview row, first contentful paint, bytes), and the
//! daemon's CPU with a logs view open on a unit printing 1000 lines/s.
//!
//! The project is generated in a temporary directory: the fixture server and a process
//! that is this binary printing `--rate` lines per second (`dashboard-printer`).

use super::cdp::Page;
use super::chromium::Chromium;
use super::daemon::Daemon;
use super::{DEADLINE, close, count, login, painted, prepare};
use crate::util::{self, TempDir};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The child that prints lines at a steady rate.
pub const PRINTER_COMMAND: &str = "dashboard-printer";

#[derive(Debug, Clone)]
pub struct BenchOpts {
    /// Cold loads measured (after one warm-up load).
    pub loads: usize,
    /// Length of one CPU window.
    pub seconds: u64,
    /// CPU windows of each kind (without, with a dashboard), alternated.
    pub rounds: usize,
    /// Lines per second the unit prints.
    pub rate: u32,
}

/// Installed in every document of a measured tab before its own scripts run (CDP's
/// scripts are not subject to the page's CSP): records when the first overview row is in
/// the DOM, and the login page's navigation start (the link's click) for the app's
/// document to read.
const OBSERVER: &str = r#"(() => {
  const b = window.__bench = { origin: performance.timeOrigin, row: null, login: null };
  if (location.pathname === '/dashboard/login') {
    try { sessionStorage.setItem('__bench_login', String(performance.timeOrigin)); } catch (e) {}
    return;
  }
  if (location.pathname !== '/dashboard/') return;
  try { b.login = Number(sessionStorage.getItem('__bench_login')) || null; } catch (e) {}
  const mo = new MutationObserver(() => {
    if (b.row === null && document.querySelector('#view-overview [data-name]')) {
      b.row = performance.now();
      mo.disconnect();
    }
  });
  mo.observe(document, { childList: true, subtree: true });
})();"#;

/// The printer: `RATE` lines a second on stdout, paced by the clock, until killed. A
/// line in 50 is coloured; each carries its sequence number.
pub fn printer_main(args: &[String]) -> ExitCode {
    let rate: u64 = args
        .first()
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(1000);
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    for seq in 0u64.. {
        let due = start + period * seq as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let line = if seq % 50 == 0 {
            format!(
                "\x1b[32mINFO\x1b[0m api: GET /api/items/{} 200 in {}.{}ms seq={seq}\n",
                seq % 977,
                seq % 13,
                seq % 10
            )
        } else {
            format!(
                "INFO api: GET /api/items/{} 200 in {}.{}ms user=u{} seq={seq}\n",
                seq % 977,
                seq % 13,
                seq % 10,
                seq % 31
            )
        };
        // One write per line, as a line-buffered dev server does.
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// One cold load's figures.
struct Load {
    /// From the login page's navigation start to the first overview row in the DOM.
    from_link: f64,
    /// From the app document's navigation start to the first overview row.
    row: f64,
    /// The app document's first contentful paint.
    fcp: f64,
    requests: Vec<Request>,
}

/// One request of a load, from the Network domain's events.
#[derive(Debug, Clone, Default)]
struct Request {
    url: String,
    kind: String,
    status: u64,
    /// Bytes on the wire, headers included (`loadingFinished`, or the sum of
    /// `dataReceived` for a stream).
    wire: u64,
    /// `Content-Length` of the response, when it had one.
    body: Option<u64>,
    encoding: String,
    done: bool,
    /// Why it failed (`loadingFailed`'s `errorText`, e.g. `net::ERR_ABORTED`).
    failed: Option<String>,
    /// The document load it belongs to.
    loader: String,
    /// An event stream's messages, framed as sent, in bytes.
    messages: u64,
}

impl Request {
    fn is_stream(&self) -> bool {
        self.kind == "EventSource"
    }

    fn path(&self) -> &str {
        let after_scheme = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        after_scheme
            .find('/')
            .map_or("/", |i| &after_scheme[i..])
            .split('#')
            .next()
            .unwrap_or("/")
    }
}

/// The requests of `session` in `events`, in the order they were sent.
fn requests(events: &[Value], session: &str) -> Vec<Request> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: BTreeMap<String, Request> = BTreeMap::new();
    for e in events {
        if e["sessionId"].as_str() != Some(session) {
            continue;
        }
        let p = &e["params"];
        let Some(id) = p["requestId"].as_str() else {
            continue;
        };
        match e["method"].as_str().unwrap_or("") {
            "Network.requestWillBeSent" => {
                if !by_id.contains_key(id) {
                    order.push(id.to_owned());
                }
                let r = by_id.entry(id.to_owned()).or_default();
                r.url = p["request"]["url"].as_str().unwrap_or("").to_owned();
                r.kind = p["type"].as_str().unwrap_or("").to_owned();
                r.loader = p["loaderId"].as_str().unwrap_or("").to_owned();
            }
            "Network.responseReceived" => {
                let r = by_id.entry(id.to_owned()).or_default();
                let resp = &p["response"];
                r.status = resp["status"].as_u64().unwrap_or(0);
                let header = |name: &str| {
                    resp["headers"].as_object().and_then(|h| {
                        h.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(name))
                            .and_then(|(_, v)| v.as_str())
                    })
                };
                r.body = header("content-length").and_then(|v| v.parse().ok());
                r.encoding = header("content-encoding").unwrap_or("").to_owned();
                if r.kind.is_empty() {
                    r.kind = p["type"].as_str().unwrap_or("").to_owned();
                }
            }
            "Network.dataReceived" => {
                let r = by_id.entry(id.to_owned()).or_default();
                if !r.done {
                    r.wire += p["encodedDataLength"].as_u64().unwrap_or(0);
                }
            }
            "Network.eventSourceMessageReceived" => {
                // Chromium does not count an event stream's bytes in `dataReceived`:
                // each message as the daemon frames it (`event: E\ndata: D\n\n`).
                let r = by_id.entry(id.to_owned()).or_default();
                let (event, data) = (
                    p["eventName"].as_str().unwrap_or(""),
                    p["data"].as_str().unwrap_or(""),
                );
                r.messages += ("event: \ndata: \n\n".len() + event.len() + data.len()) as u64;
            }
            "Network.loadingFinished" => {
                let r = by_id.entry(id.to_owned()).or_default();
                r.wire = p["encodedDataLength"].as_u64().unwrap_or(r.wire);
                r.done = true;
            }
            "Network.loadingFailed" => {
                let r = by_id.entry(id.to_owned()).or_default();
                r.done = true;
                r.failed = Some(p["errorText"].as_str().unwrap_or("failed").to_owned());
            }
            _ => {}
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}

/// One cold load: a new tab, no cache, no cookies, a fresh login link.
async fn cold_load(chromium: &Chromium, daemon: &Daemon) -> Result<Load, String> {
    let url = daemon.login_url()?;
    let page = chromium.page().await;
    prepare(&page).await?;
    page.call("Network.enable", json!({})).await?;
    page.call("Network.setCacheDisabled", json!({"cacheDisabled": true}))
        .await?;
    page.call("Network.clearBrowserCookies", json!({})).await?;
    page.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({"source": OBSERVER}),
    )
    .await?;
    let from = page.cdp.events.len();
    page.navigate(&url, DEADLINE).await?;
    page.wait_until(
        "location.pathname === '/dashboard/' && !!window.__bench && window.__bench.row !== null",
        &json!(true),
        DEADLINE,
    )
    .await
    .map_err(|e| format!("the first overview row: {e}"))?;
    page.wait_until(
        "performance.getEntriesByName('first-contentful-paint').length > 0",
        &json!(true),
        DEADLINE,
    )
    .await?;
    // Every request the load made has finished (the event streams excepted).
    loop {
        let seen = page.cdp.events.len();
        let events = page.cdp.events.snapshot();
        let reqs = requests(&events[from..], &page.session);
        // The app document's requests: the login page's last one (its POST) may be cut
        // short by the navigation to the app without an event saying so.
        let app = reqs
            .iter()
            .rev()
            .find(|r| r.kind == "Document")
            .map(|r| r.loader.clone())
            .unwrap_or_default();
        let pending: Vec<String> = reqs
            .iter()
            .filter(|r| !r.done && !r.is_stream() && r.loader == app)
            .map(|r| r.url.clone())
            .collect();
        if pending.is_empty() {
            break;
        }
        let session = page.session.clone();
        page.cdp
            .events
            .wait_for_from(
                seen,
                &format!("the load's requests to finish ({pending:?})"),
                DEADLINE,
                |e| {
                    (e["sessionId"].as_str() == Some(&session)
                        && matches!(
                            e["method"].as_str(),
                            Some("Network.loadingFinished" | "Network.loadingFailed")
                        ))
                    .then_some(())
                },
            )
            .await?;
    }
    // The event stream's first message as Chromium reports it (its DOM effect can come
    // before the report does).
    let stream_counted = |e: &Value, ids: &[String]| {
        e["method"] == "Network.eventSourceMessageReceived"
            && e["params"]["requestId"]
                .as_str()
                .is_some_and(|id| ids.iter().any(|s| s == id))
    };
    let stream_ids: Vec<String> = page
        .cdp
        .events
        .snapshot()
        .iter()
        .skip(from)
        .filter(|e| {
            e["sessionId"].as_str() == Some(&page.session)
                && e["method"] == "Network.requestWillBeSent"
                && e["params"]["type"] == "EventSource"
        })
        .filter_map(|e| e["params"]["requestId"].as_str().map(str::to_owned))
        .collect();
    if !stream_ids.is_empty() {
        let _ = page
            .cdp
            .events
            .wait_for_from(
                from,
                "the event stream's first message",
                Duration::from_secs(5),
                |e| stream_counted(e, &stream_ids).then_some(()),
            )
            .await;
    }
    let b = page
        .evaluate(
            "({ origin: window.__bench.origin, row: window.__bench.row, login: window.__bench.login, \
               fcp: performance.getEntriesByName('first-contentful-paint')[0].startTime })",
        )
        .await?;
    let f = |k: &str| b[k].as_f64();
    let (origin, row, fcp) = (
        f("origin").ok_or("no timeOrigin")?,
        f("row").ok_or("no row time")?,
        f("fcp").ok_or("no first contentful paint")?,
    );
    let login = f("login").ok_or("the login page's navigation start was not recorded")?;
    let events = page.cdp.events.snapshot();
    let requests = requests(&events[from..], &page.session);
    close(page).await?;
    Ok(Load {
        from_link: origin + row - login,
        row,
        fcp,
        requests,
    })
}

/// The CPU of a set of processes over a window: pid → CPU at its start.
fn cpu_of(pids: &[u32]) -> BTreeMap<u32, Duration> {
    pids.iter()
        .filter_map(|&p| Some((p, util::proc_stat_cpu(p)?)))
        .collect()
}

/// CPU used between two readings, over the processes in both.
fn cpu_delta(before: &BTreeMap<u32, Duration>, after: &BTreeMap<u32, Duration>) -> Duration {
    before
        .iter()
        .filter_map(|(p, b)| Some(after.get(p)?.saturating_sub(*b)))
        .sum()
}

/// Chromium's processes (all descendants of this one: the daemon is not), and which of
/// them are renderers.
fn browser_processes() -> (Vec<u32>, Vec<u32>) {
    let all: Vec<u32> = util::descendants_of(std::process::id())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let renderers = all
        .iter()
        .copied()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--type=renderer"))
        })
        .collect();
    (all, renderers)
}

/// One CPU window's figures, as % of one core.
struct Window {
    daemon: f64,
    renderer: f64,
    browser: f64,
    /// Lines the page received in the window (its last line's `seq=` advanced by).
    lines: Option<u64>,
}

/// The `seq=` of the last log line the page shows.
async fn last_seq(page: &Page) -> Result<Option<u64>, String> {
    let v = page
        .evaluate(
            "(() => { const l = document.querySelectorAll('#log-lines .log-line'); \
               const m = l.length ? /seq=(\\d+)/.exec(l[l.length - 1].textContent) : null; \
               return m ? Number(m[1]) : null; })()",
        )
        .await?;
    Ok(v.as_u64())
}

async fn window(daemon_pid: u32, secs: u64, page: Option<&Page>) -> Result<Window, String> {
    let (browser, renderers) = browser_processes();
    let seq0 = match page {
        Some(p) => last_seq(p).await?,
        None => None,
    };
    let (d0, b0, r0) = (cpu_of(&[daemon_pid]), cpu_of(&browser), cpu_of(&renderers));
    let t0 = Instant::now();
    // The measurement window itself: nothing to wait for but time.
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (d1, b1, r1) = (cpu_of(&[daemon_pid]), cpu_of(&browser), cpu_of(&renderers));
    let wall = t0.elapsed().as_secs_f64();
    let seq1 = match page {
        Some(p) => last_seq(p).await?,
        None => None,
    };
    if d1.is_empty() {
        return Err("the daemon is gone".into());
    }
    let pct = |d: Duration| d.as_secs_f64() / wall * 100.0;
    Ok(Window {
        daemon: pct(cpu_delta(&d0, &d1)),
        renderer: pct(cpu_delta(&r0, &r1)),
        browser: pct(cpu_delta(&b0, &b1)),
        lines: seq0.zip(seq1).map(|(a, b)| b.saturating_sub(a)),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Writes the bench's project: the fixture server and the printer.
fn write_project(dir: &Path, fixture: &Path, rate: u32) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let config = dir.join("corral.toml");
    let text = format!(
        "# corral-bench dashboard's project\n\
         [servers.fixture]\ncommand = {fixture:?}\nargs = [\"--tools\", \"3\"]\n\n\
         [processes.spam]\ncommand = [{exe:?}, \"{PRINTER_COMMAND}\", \"{rate}\"]\n",
        fixture = fixture.display().to_string(),
        exe = exe.display().to_string(),
    );
    std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
    Ok(config)
}

/// The whole benchmark; its Markdown.
pub fn run(corral: &Path, fixture: &Path, opts: &BenchOpts) -> Result<String, String> {
    let dir = TempDir::new("dashboard");
    let config = write_project(dir.path(), fixture, opts.rate)?;
    let daemon = Daemon::up(corral, &config)?;
    let rt = util::runtime();
    let out = rt.block_on(async {
        let chromium = Chromium::launch().await;
        let result = measure(&chromium, &daemon, opts).await;
        let tail = chromium.stderr_tail();
        chromium.close().await;
        result.map_err(|e| format!("{e}\n{tail}"))
    });
    drop(daemon);
    drop(dir);
    out
}

async fn measure(chromium: &Chromium, daemon: &Daemon, opts: &BenchOpts) -> Result<String, String> {
    let mut out = String::new();
    let version = chromium
        .cdp
        .call(None, "Browser.getVersion", json!({}))
        .await?;
    out += &format!(
        "Browser: {} (headless), viewport {}×{}. Corral: `corral up -d` of a generated \
         project (the fixture server; `spam`, a process printing {} lines/s).\n\n",
        version["product"].as_str().unwrap_or("?"),
        super::VIEWPORT.0,
        super::VIEWPORT.1,
        opts.rate
    );

    // (a), (b): cold loads; the first one warms the browser up and is not counted.
    cold_load(chromium, daemon).await?;
    let mut loads = Vec::new();
    for _ in 0..opts.loads {
        loads.push(cold_load(chromium, daemon).await?);
    }
    let stat = |f: &dyn Fn(&Load) -> f64| {
        let v: Vec<f64> = loads.iter().map(f).collect();
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        format!("{:.0} | {:.0} | {:.0}", median(v), min, max)
    };
    out += &format!(
        "#### Cold loads ({} loads after one warm-up; each a new tab, cache disabled, cookies \
         cleared, a fresh login link)\n\n\
         | from … to … (ms) | median | min | max |\n|---|---:|---:|---:|\n\
         | login link opened → first overview row in the DOM | {} |\n\
         | app page's navigation start → first overview row in the DOM | {} |\n\
         | app page's navigation start → first contentful paint | {} |\n\n",
        loads.len(),
        stat(&|l| l.from_link),
        stat(&|l| l.row),
        stat(&|l| l.fcp),
    );

    // (b) bytes: the last load's requests.
    let last = loads.last().ok_or("no load")?;
    out += "#### Bytes of a first visit (the last load; wire = headers + body, as Chromium \
            counts them)\n\n\
            | request | type | status | encoding | body (Content-Length) | wire |\n\
            |---|---|---:|---|---:|---:|\n";
    let (mut wire, mut body) = (0u64, 0u64);
    for r in last.requests.iter().filter(|r| !r.is_stream()) {
        wire += r.wire;
        body += r.body.unwrap_or(0);
        let status = match &r.failed {
            Some(why) => why.clone(),
            None if !r.done => format!("{} (cut short by the navigation)", r.status),
            None => r.status.to_string(),
        };
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            r.path(),
            r.kind,
            status,
            if r.encoding.is_empty() {
                "—"
            } else {
                &r.encoding
            },
            r.body.map_or("—".to_owned(), |b| b.to_string()),
            r.wire
        );
    }
    out += &format!("| **total** (event streams excluded) | | | | **{body}** | **{wire}** |\n");
    for r in last.requests.iter().filter(|r| r.is_stream()) {
        out += &format!(
            "| `{}` (event stream until the load was over; body: its messages) | {} | {} | {} | {} | {} |\n",
            r.path(),
            r.kind,
            r.status,
            if r.encoding.is_empty() {
                "—"
            } else {
                &r.encoding
            },
            r.messages,
            if r.wire > 0 {
                r.wire.to_string()
            } else {
                "—".into()
            }
        );
    }
    out += &format!(
        "\n`corral_daemon::dashboard::transferred_size()` (both pages and every file, \
         gzip bodies only): {} bytes.\n\n",
        corral_daemon::dashboard::transferred_size()
    );

    // (c) CPU: alternating windows without and with a dashboard on the unit's log.
    let pid = daemon.pid;
    let mut without = Vec::new();
    let mut with = Vec::new();
    for _ in 0..opts.rounds {
        without.push(window(pid, opts.seconds, None).await?);
        let page = chromium.page().await;
        prepare(&page).await?;
        login(&page, &daemon.login_url()?).await?;
        page.evaluate("location.hash = '#logs/spam'").await?;
        super::wait_count(&page, "#log-lines .log-line", 10).await?;
        painted(&page).await?;
        let visible = page.evaluate("document.visibilityState").await?;
        if visible != "visible" {
            return Err(format!("the dashboard's tab is {visible}, not visible"));
        }
        with.push(window(pid, opts.seconds, Some(&page)).await?);
        let shown = count(&page, "#log-lines .log-line").await?;
        if shown == 0 {
            return Err("the logs view shows no lines".into());
        }
        close(page).await?;
    }
    let row = |name: &str, ws: &[Window], page: bool| {
        let each = |f: &dyn Fn(&Window) -> f64| {
            ws.iter()
                .map(|w| format!("{:.1}", f(w)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let lines = if page {
            let v: Vec<String> = ws
                .iter()
                .map(|w| {
                    w.lines.map_or("?".into(), |n| {
                        format!("{:.0}", n as f64 / opts.seconds as f64)
                    })
                })
                .collect();
            v.join(", ")
        } else {
            "—".into()
        };
        format!(
            "| {name} | {:.1} ({}) | {} | {} | {} |\n",
            median(ws.iter().map(|w| w.daemon).collect()),
            each(&|w| w.daemon),
            if page {
                format!("{:.1}", median(ws.iter().map(|w| w.renderer).collect()))
            } else {
                "—".into()
            },
            if page {
                format!("{:.1}", median(ws.iter().map(|w| w.browser).collect()))
            } else {
                "—".into()
            },
            lines
        )
    };
    out += &format!(
        "#### CPU while `spam` prints {} lines/s ({} windows of {} s each, alternated; % of \
         one core, utime + stime from /proc/PID/stat)\n\n\
         | | daemon: median (each window) | renderer(s) | Chromium, all processes | lines/s the page received |\n\
         |---|---:|---:|---:|---:|\n",
        opts.rate, opts.rounds, opts.seconds
    );
    out += &row("no dashboard open", &without, false);
    out += &row("dashboard open on `#logs/spam`", &with, true);
    Ok(out)
}

//! `corral-bench errors`: how long one `get_errors` takes when every ring it reads is
//! full — the alert ring (a dev process printing distinct Python tracebacks), a dev
//! proxy's traffic ring (requests to a target that is down: transport errors) and its
//! browser ring (error reports as the injected script posts them), every entry distinct,
//! so deduplication folds nothing. Measured in-process, the way the daemon answers the
//! tool: gathering from live state, windowing, noise, dedup, ranking, and the text and
//! JSON of the answer.

use crate::util::TempDir;
use corral_config::{ProcessCommand, ProcessConfig};
use corral_events::EventBus;
use corral_supervisor::Supervisor;
use corral_supervisor::alerts::Alerts;
use serde_json::json;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Alerts the default `[alerts] ring` keeps.
const ALERT_RING: usize = 200;
/// Requests a proxy's traffic ring keeps by default.
const TRAFFIC_RING: usize = 1000;
/// Reports a proxy's browser ring keeps.
const BROWSER_RING: usize = corral_proxy::browser::RING;

/// Prints a traceback per distinct message, then stays up (so its run is the current one).
const PRINTER: &str = "import sys, time, traceback\n\
def handler(i):\n    raise ValueError(f'bad record {i}')\n\
for i in range(300):\n    try:\n        handler(i)\n    except ValueError:\n        traceback.print_exc()\n\
    sys.stderr.flush()\n\
print('done', flush=True)\ntime.sleep(600)\n";

pub fn run(calls: usize) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(measure(calls))
}

async fn measure(calls: usize) -> Result<String, String> {
    let dir = TempDir::new("errors");
    let bus = EventBus::default();
    let mut opts = corral_supervisor::SupervisorOptions::new(bus.clone(), dir.path().join("logs"));
    let alerts = Alerts::new(&Default::default(), bus.clone())?;
    opts.alerts = Some(alerts.clone());
    let mut sup = Supervisor::start(Vec::new(), &opts);
    let mut cfg = ProcessConfig::ad_hoc(
        "printer",
        ProcessCommand::Argv(vec!["python3".into(), "-c".into(), PRINTER.into()]),
        dir.path().to_owned(),
    );
    cfg.quiet = true;
    sup.add_process(cfg)?;

    let proxies = corral_proxy::Proxies::new(bus.clone());
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;
    let proxy = proxies
        .start(corral_proxy::ProxySpec::new(
            "web",
            &format!("http://{dead}"),
            "127.0.0.1:0",
        ))
        .await?;
    let addr = proxy.addr();
    tokio::task::spawn_blocking(move || fill_proxy(addr))
        .await
        .map_err(|e| e.to_string())??;
    // The browser ring directly: the endpoint's rate limit would take seconds to let
    // 500 distinct errors in (what is measured here is get_errors, not the endpoint).
    for n in 0..BROWSER_RING {
        proxy.browser().record(corral_proxy::browser::BrowserEntry {
            proxy: "web".into(),
            kind: "error".into(),
            message: format!("TypeError: item {n} is undefined"),
            source: format!("http://{addr}/assets/app.js"),
            line: 1,
            column: n as u32,
            page: format!("http://{addr}/items"),
            location: format!("http://{addr}/assets/app.js:1:{n}"),
            ..Default::default()
        });
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    let full = || {
        alerts.query(&Default::default()).len() >= ALERT_RING
            && proxy.traffic().total() >= TRAFFIC_RING as u64
            && proxy.browser().total() >= BROWSER_RING as u64
    };
    while !full() {
        if Instant::now() > deadline {
            return Err(format!(
                "the rings did not fill in 60 s: {} alerts, {} requests, {} browser errors",
                alerts.query(&Default::default()).len(),
                proxy.traffic().total(),
                proxy.browser().total()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let servers = Default::default();
    let src = corral_gateway::tools::errors::Sources {
        servers: &servers,
        root: Some(dir.path()),
        noise: &[],
        processes: Some(sup.processes()),
        proxies: Some(&proxies),
        last_call: None,
        history: None,
    };
    let mut rows = Vec::new();
    for (label, args) in [
        ("default (limit 25)", json!({})),
        ("limit 500, raw", json!({"limit": 500, "raw": true})),
    ] {
        let mut times = Vec::with_capacity(calls);
        let mut shown = 0;
        let mut bytes = 0;
        for i in 0..calls + calls / 10 {
            let t = Instant::now();
            let (report, raw) = corral_gateway::tools::errors::answer(&src, &args).await?;
            let text = report.text();
            let json = report.json(raw).to_string();
            let took = t.elapsed();
            if i >= calls / 10 {
                times.push(took);
            }
            shown = report.entries.len();
            bytes = text.len() + json.len();
        }
        times.sort();
        let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
        rows.push(format!(
            "| {label} | {shown} | {} | {:.2} ms | {:.2} ms |",
            bytes,
            pct(0.5).as_secs_f64() * 1e3,
            pct(0.99).as_secs_f64() * 1e3
        ));
    }
    let entries = ALERT_RING + TRAFFIC_RING + BROWSER_RING;
    proxies.stop_all().await;
    sup.shutdown(Duration::from_secs(5)).await;
    Ok(format!(
        "## get_errors with every ring full (`corral-bench errors`)\n\n\
         {ALERT_RING} alerts (distinct Python tracebacks of a dev process), {TRAFFIC_RING} \
         failed requests (distinct paths, target down) and {BROWSER_RING} browser errors \
         (distinct messages) in one proxy: {entries} records, none folded by deduplication. \
         One call = gather + window + noise + dedup + rank + the text and the JSON, \
         in-process; {calls} calls after {} warm-up.\n\n\
         | query | entries shown | answer bytes (text + JSON) | p50 | p99 |\n\
         |---|---:|---:|---:|---:|\n{}\n",
        calls / 10,
        rows.join("\n")
    ))
}

/// Fills the proxy's traffic ring (each request a transport error, the target being
/// down), every entry distinct.
fn fill_proxy(addr: std::net::SocketAddr) -> Result<(), String> {
    let send = |request: String| -> Result<(), String> {
        let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).map_err(|e| e.to_string())?;
        Ok(())
    };
    for i in 0..TRAFFIC_RING {
        send(format!(
            "GET /api/items/{i} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        ))?;
    }
    Ok(())
}

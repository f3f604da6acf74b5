//! `corral-bench bombs`: the dev proxy's peak memory (VmHWM) against decompression bombs
//! and a map cache flood, each in a fresh process, so that one figure is one attack:
//!
//! * `script`: one report naming `bm.js`, served `Content-Encoding: gzip` decoding to
//!   512 MiB (source mapping fetches it);
//! * `maps`: 64 reports naming `bm.js?v=N`, all mapped by one ordinary 4 MB map;
//! * `page`: an 815 KB gzip HTML page (815 MiB of white space) fetched through the proxy;
//! * `error-page`: a 100 KB gzip 500 page (the traffic excerpt, and injection).
//!
//! The target runs in the same process (tokio, hyper); its bombs are built from one
//! gzip member of 1 MiB of spaces repeated (gzip allows members back to back).

use http_body_util::{BodyExt, Full};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const CHILD_COMMAND: &str = "bombs-one";
const SCENARIOS: [&str; 4] = ["script", "maps", "page", "error-page"];

/// Runs each scenario in a child process and tabulates what they print.
pub fn run() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for name in SCENARIOS {
        let out = std::process::Command::new(&exe)
            .args([CHILD_COMMAND, name])
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() {
            return Err(format!(
                "{name}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        rows.push(text);
    }
    Ok(format!(
        "## Decompression bombs (`corral-bench bombs`)\n\n\
         | attack | VmHWM before | VmHWM after | time | bytes to the client |\n\
         |---|---:|---:|---:|---:|\n{}\n",
        rows.join("\n")
    ))
}

/// One scenario, in this (fresh) process: prints its table row.
pub fn child_main(name: &str) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(scenario(name))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// `head` then members of 1 MiB of spaces until about `coded` bytes.
fn bomb(head: &[u8], coded: usize) -> Vec<u8> {
    let mut out = gzip(head);
    let member = gzip(&vec![b' '; 1 << 20]);
    while out.len() + member.len() <= coded {
        out.extend_from_slice(&member);
    }
    out
}

/// A source map of about 4 MB: one source, a mapping per column of line 1.
fn map() -> Vec<u8> {
    let mappings = format!("AAAA{}", ",CAAC".repeat(800_000));
    format!(r#"{{"version":3,"sources":["src/a.ts"],"names":[],"mappings":"{mappings}"}}"#)
        .into_bytes()
}

type Routes = Vec<(&'static str, &'static str, Option<&'static str>, Vec<u8>)>;

async fn target(routes: Routes) -> SocketAddr {
    let routes = Arc::new(routes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let routes = routes.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let found = routes.iter().find(|r| r.0 == req.uri().path());
                    let mut resp = hyper::Response::new(Full::new(bytes(found)));
                    if let Some((path, ctype, coding, _)) = found {
                        let h = resp.headers_mut();
                        h.insert("content-type", ctype.parse().unwrap());
                        if let Some(c) = coding {
                            h.insert("content-encoding", c.parse().unwrap());
                        }
                        if *path == "/500" {
                            *resp.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                        }
                    } else {
                        *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
                    }
                    async move { Ok::<_, std::convert::Infallible>(resp.map(|b| b.boxed())) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    addr
}

fn bytes(found: Option<&(&str, &str, Option<&str>, Vec<u8>)>) -> bytes::Bytes {
    found.map_or_else(bytes::Bytes::new, |r| bytes::Bytes::from(r.3.clone()))
}

/// Sends one request with `Connection: close`; returns the bytes of the answer.
async fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> Result<u64, String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{head}\r\nHost: {addr}\r\nAccept-Encoding: gzip\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    stream.write_all(body).await.map_err(|e| e.to_string())?;
    let (mut total, mut buf) = (0u64, vec![0u8; 64 << 10]);
    loop {
        match stream.read(&mut buf).await.map_err(|e| e.to_string())? {
            0 => return Ok(total),
            n => total += n as u64,
        }
    }
}

fn vm_hwm_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// A report as the injected script sends it, with the proxy's key.
fn report(addr: SocketAddr, key: &str, source: &str) -> String {
    let origin = format!("http://{addr}");
    serde_json::json!({"key": key, "page": format!("{origin}/"), "errors": [
        {"message": "boom", "source": format!("{origin}{source}"), "line": 1, "column": 5}
    ]})
    .to_string()
}

async fn scenario(name: &str) -> Result<String, String> {
    let script = b"var a;\n//# sourceMappingURL=bm.js.map\n".to_vec();
    let routes: Routes = match name {
        "script" => vec![(
            "/bm.js",
            "text/javascript",
            Some("gzip"),
            bomb(b"", 512 << 10),
        )],
        "maps" => vec![
            ("/bm.js", "text/javascript", None, script),
            ("/bm.js.map", "application/json", None, map()),
        ],
        "page" => vec![(
            "/page",
            "text/html",
            Some("gzip"),
            bomb(b"<!doctype html><html>", 815 << 10),
        )],
        "error-page" => vec![(
            "/500",
            "text/html",
            Some("gzip"),
            bomb(b"<html>", 100 << 10),
        )],
        other => return Err(format!("no scenario {other}")),
    };
    let coded: usize = routes.iter().map(|r| r.3.len()).sum();
    let target = target(routes).await;
    let bus = corral_events::EventBus::new(1024);
    let spec = corral_proxy::ProxySpec::new("web", &format!("http://{target}"), "127.0.0.1:0");
    let proxy = corral_proxy::Proxy::start(spec, bus)
        .await
        .map_err(|e| e.to_string())?;
    let addr = proxy.addr();
    let before = vm_hwm_mib();
    let started = Instant::now();
    let mut sent = 0;
    let reports = match name {
        "script" => 1,
        "maps" => 64,
        _ => 0,
    };
    for i in 0..reports {
        let body = report(addr, proxy.report_key(), &format!("/bm.js?v={i}"));
        exchange(
            addr,
            "POST /__corral/errors HTTP/1.1\r\nContent-Type: application/json",
            body.as_bytes(),
        )
        .await?;
    }
    if reports > 0 {
        let deadline = Instant::now() + Duration::from_secs(120);
        while proxy.browser().total() < reports {
            if Instant::now() > deadline {
                return Err(format!("{name}: reports not recorded in 120 s"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    } else {
        let path = if name == "page" { "/page" } else { "/500" };
        sent = exchange(
            addr,
            &format!("GET {path} HTTP/1.1\r\nAccept: text/html"),
            b"",
        )
        .await?;
    }
    let took = started.elapsed();
    let after = vm_hwm_mib();
    proxy.stop().await;
    Ok(format!(
        "| {name} ({} KB coded) | {before:.1} MiB | {after:.1} MiB | {:.2} s | {sent} |",
        coded / 1000,
        took.as_secs_f64()
    ))
}

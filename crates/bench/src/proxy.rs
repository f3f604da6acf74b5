//! `corral-bench proxy`: the dev proxy (`corral proxy --standalone`) against the same
//! target reached directly and through nginx as a plain reverse proxy.
//!
//! Every party is its own process, so that each one's CPU can be read apart:
//!
//! - the **target**: this binary re-executed as `corral-bench proxy-target`, a minimal
//!   hyper HTTP/1.1 server (2 tokio workers, keep-alive) answering `GET /small` with 1 KiB
//!   of text/plain and `GET /page` with a 1 MiB HTML document. It prints its port.
//! - **Corral**: `corral proxy bench --target http://127.0.0.1:PORT --listen 127.0.0.1:0
//!   --standalone`, which prints the URL it listens on.
//! - **nginx**: Debian's `/usr/sbin/nginx` with a generated configuration in a temp dir
//!   (see [`NGINX_CONF`]).
//! - the **client**: this process, on a current-thread tokio runtime. C keep-alive
//!   connections (`hyper::client::conn::http1`, one per connection, no pool), each a loop
//!   of sequential `GET /small`.
//!
//! Forwarding (`/small`): rounds of direct, Corral, nginx (the order rotated every round),
//! each a 1 s warm-up and N measured seconds; the median round (by requests/s) of each
//! path is reported. CPU is utime + stime from `/proc/PID/stat` (the proxy: the process
//! and its descendants; nginx: master and workers) over the measured window.
//!
//! Injection (`/page`): one connection, sequential GETs of the 1 MiB page, time to last
//! byte, interleaved between the paths in the same way.

use crate::util::{self, Stats};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The hidden subcommand that runs the target server.
pub const TARGET_COMMAND: &str = "proxy-target";
/// Debian's nginx.
const NGINX: &str = "/usr/sbin/nginx";
const WARMUP: Duration = Duration::from_secs(1);
/// Bound on one request; past it the request counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on a proxy or the target printing its address.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Sequential GETs of the 1 MiB page per path (split over the rounds), plus a warm-up of
/// [`PAGE_WARMUP`] per path and round.
const PAGE_REQUESTS: usize = 200;
const PAGE_WARMUP: usize = 5;
const SMALL_BYTES: usize = 1024;
const PAGE_BYTES: usize = 1024 * 1024;
/// The goals: ≥ 80% of direct requests/s, and less CPU per request than nginx.
const GOAL_RPS_SHARE: f64 = 0.80;
const CORRAL: &str = "Corral (`corral proxy`)";
const CORRAL_RAW: &str = "Corral, `--no-inject`";
const NGINX_LABEL: &str = "nginx (reverse proxy)";

/// Settings of the `proxy` benchmark.
pub struct ProxyOpts {
    /// Measured time of one round of one path.
    pub seconds: Duration,
    /// Keep-alive connections of the client.
    pub connections: usize,
    pub rounds: usize,
}

/// nginx as a plain reverse proxy. `worker_processes 2`: one per core, as Corral's proxy
/// runs tokio's multi-thread runtime with 2 workers on this 2-core machine. No access log
/// (Corral records every request in its traffic ring: that is in Corral's cost); keep-alive
/// to the client and to the target, without nginx's default cap of 1000 requests per
/// connection; `proxy_max_temp_file_size 0`: a response larger than the memory buffers is
/// passed on as it comes instead of spooled to a temp file (Corral streams it too).
const NGINX_CONF: &str = "\
daemon off;
master_process on;
worker_processes 2;
pid PREFIX/nginx.pid;
error_log PREFIX/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path PREFIX/tmp/body;
    proxy_temp_path PREFIX/tmp/proxy;
    fastcgi_temp_path PREFIX/tmp/fastcgi;
    uwsgi_temp_path PREFIX/tmp/uwsgi;
    scgi_temp_path PREFIX/tmp/scgi;
    upstream target {
        server 127.0.0.1:TARGET_PORT;
        keepalive 64;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:LISTEN_PORT;
        keepalive_requests 100000000;
        keepalive_timeout 300s;
        location / {
            proxy_pass http://target;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_max_temp_file_size 0;
        }
    }
}
";

// ---------------------------------------------------------------------------------------
// The target server

/// `corral-bench proxy-target`: serves until stdin closes (the bench holds it open).
pub fn target_main() -> ExitCode {
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    let small = Bytes::from(small_body());
    let page = Bytes::from(page_body());
    let result: Result<(), String> = util::runtime().block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        println!("{port}");
        let _ = std::io::stdout().flush();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (small, page) = (small.clone(), page.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (small, page) = (small.clone(), page.clone());
                    async move { Ok::<_, Infallible>(answer(&req, small, page)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("corral-bench {TARGET_COMMAND}: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn answer(req: &Request<Incoming>, small: Bytes, page: Bytes) -> Response<Full<Bytes>> {
    let (body, ctype) = match req.uri().path() {
        "/small" => (small, "text/plain; charset=utf-8"),
        "/page" => (page, "text/html; charset=utf-8"),
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            return r;
        }
    };
    Response::builder()
        .header(hyper::header::CONTENT_TYPE, ctype)
        .body(Full::new(body))
        .expect("static response parts")
}

fn small_body() -> Vec<u8> {
    let line = b"the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    line.iter().copied().cycle().take(SMALL_BYTES).collect()
}

/// A 1 MiB HTML document: a head with a title, then `<p>` lines, padded to the byte.
fn page_body() -> Vec<u8> {
    let head = "<!doctype html>\n<html><head><title>t</title></head><body>\n";
    let tail = "</body></html>\n";
    let mut s = String::with_capacity(PAGE_BYTES);
    s.push_str(head);
    for i in 0.. {
        let line = format!("<p>Paragraph {i}: lorem ipsum dolor sit amet, consectetur.</p>\n");
        if s.len() + line.len() + tail.len() > PAGE_BYTES {
            break;
        }
        s.push_str(&line);
    }
    s.push_str(&" ".repeat(PAGE_BYTES - s.len() - tail.len()));
    s.push_str(tail);
    s.into_bytes()
}

// ---------------------------------------------------------------------------------------
// Processes

/// A child process killed on drop. nginx stays in the bench's process group, so that a
/// Ctrl-C reaches it too; on drop its master gets SIGTERM (it stops its workers), then
/// whatever is left of the group it leads gets SIGKILL.
struct Proc {
    child: Child,
    name: &'static str,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.child.id();
        let workers = util::descendants_of(pid);
        // SAFETY: kill with a pid we started and have not reaped yet.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for (w, _) in workers {
            // SAFETY: kill has no memory preconditions; a pid gone by now is ESRCH.
            unsafe { libc::kill(w as libc::pid_t, libc::SIGKILL) };
        }
        eprintln!("proxy: stopped {}", self.name);
    }
}

/// User + system CPU of `pids` and their live descendants.
fn cpu_of(pids: &[u32]) -> Duration {
    pids.iter()
        .flat_map(|&p| std::iter::once(p).chain(util::descendants_of(p).into_iter().map(|d| d.0)))
        .filter_map(util::proc_stat_cpu)
        .sum()
}

/// Reads `child`'s stdout on a thread until `find` accepts a line; the thread keeps
/// draining the rest.
fn wait_for_line(
    child: &mut Child,
    find: impl Fn(&str) -> Option<u16> + Send + 'static,
) -> Result<u16, String> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut found = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !found && let Some(port) = find(&line) {
                found = true;
                let _ = tx.send(port);
            }
        }
    });
    rx.recv_timeout(START_TIMEOUT)
        .map_err(|_| "printed no address".to_owned())
}

fn start_target(dir: &Path) -> Result<(Proc, u16), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate own executable: {e}"))?;
    let mut child = Command::new(exe)
        .arg(TARGET_COMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log_file(dir, "target.stderr")?)
        .spawn()
        .map_err(|e| format!("cannot start the target: {e}"))?;
    let port = wait_for_line(&mut child, |l| l.trim().parse().ok());
    let proc = Proc {
        child,
        name: "the target",
    };
    Ok((proc, port.map_err(|e| format!("the target {e}"))?))
}

/// `corral proxy NAME --target … --listen 127.0.0.1:0 --standalone [--no-inject]`, in
/// `dir` (no project configuration there).
fn start_corral(
    corral: &Path,
    target: u16,
    dir: &Path,
    inject: bool,
) -> Result<(Proc, u16), String> {
    let name = if inject { "bench" } else { "bench-raw" };
    let stderr = format!("corral-{name}.stderr");
    let mut child = Command::new(corral)
        .args(["proxy", name, "--target"])
        .arg(format!("http://127.0.0.1:{target}"))
        .args(["--listen", "127.0.0.1:0", "--standalone"])
        .args(if inject { None } else { Some("--no-inject") })
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file(dir, &stderr)?)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", corral.display()))?;
    let port = wait_for_line(&mut child, |l| {
        let rest = &l[l.find("http://127.0.0.1:")? + "http://127.0.0.1:".len()..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    });
    let mut proc = Proc {
        child,
        name: "corral proxy",
    };
    match port {
        Ok(port) => Ok((proc, port)),
        Err(e) => {
            let status = proc.exited().unwrap_or_else(|| "still running".into());
            Err(format!(
                "`corral proxy {name}` {e} ({status}); its stderr: {}",
                tail(&dir.join(stderr))
            ))
        }
    }
}

/// nginx cannot listen on port 0: a free port is found by binding 127.0.0.1:0 and
/// released just before nginx starts. Another process could take it in between; if
/// nginx then fails to bind, it is tried once more with a new port.
fn start_nginx(target: u16, dir: &Path) -> Result<(Proc, u16), String> {
    if !Path::new(NGINX).is_file() {
        return Err(format!("{NGINX} is not installed (apt-get install nginx)"));
    }
    for dir_name in [
        "tmp/body",
        "tmp/proxy",
        "tmp/fastcgi",
        "tmp/uwsgi",
        "tmp/scgi",
    ] {
        std::fs::create_dir_all(dir.join(dir_name)).map_err(|e| e.to_string())?;
    }
    let mut last = String::new();
    for _attempt in 0..2 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot find a free port: {e}"))?
            .port();
        let conf = NGINX_CONF
            .replace("PREFIX", &dir.to_string_lossy())
            .replace("TARGET_PORT", &target.to_string())
            .replace("LISTEN_PORT", &port.to_string());
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(dir.join("error.log"));
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(dir, "nginx.stderr")?)
            .spawn()
            .map_err(|e| format!("cannot start {NGINX}: {e}"))?;
        let mut proc = Proc {
            child,
            name: "nginx",
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = proc.exited() {
                last = format!("nginx exited ({status}): {}", tail(&dir.join("error.log")));
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // The master is up; wait for both workers.
                while util::children_of(proc.pid()).len() < 2 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Ok((proc, port));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if last.is_empty() {
            last = "nginx did not listen in time".into();
        }
    }
    Err(last)
}

fn log_file(dir: &Path, name: &str) -> Result<std::fs::File, String> {
    std::fs::File::create(dir.join(name)).map_err(|e| format!("{name}: {e}"))
}

/// The last lines of a log, for error messages.
fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

// ---------------------------------------------------------------------------------------
// The client

struct Conn {
    port: u16,
    sender: SendRequest<Empty<Bytes>>,
}

impl Conn {
    async fn open(port: u16) -> Result<Conn, String> {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect to port {port}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { port, sender })
    }

    /// GET `path`, the whole body read; its length. Reconnects first if the server
    /// closed the connection.
    async fn get(&mut self, path: &str) -> Result<usize, String> {
        if self.sender.is_closed() {
            *self = Conn::open(self.port).await?;
        }
        let req = Request::get(path)
            .header(hyper::header::HOST, format!("127.0.0.1:{}", self.port))
            .body(Empty::new())
            .expect("static request parts");
        let work = async {
            self.sender.ready().await.map_err(|e| e.to_string())?;
            let resp = self
                .sender
                .send_request(req)
                .await
                .map_err(|e| e.to_string())?;
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            if !status.is_success() {
                return Err(format!("status {status}"));
            }
            Ok(body.len())
        };
        tokio::time::timeout(REQUEST_TIMEOUT, work)
            .await
            .map_err(|_| format!("no answer in {REQUEST_TIMEOUT:?}"))?
    }
}

/// One measured window of one path.
struct Round {
    requests: usize,
    errors: usize,
    rps: f64,
    stats: Stats,
    /// CPU of the proxy per request (`None`: direct).
    proxy_cpu: Option<Duration>,
    target_cpu: Duration,
    /// CPU of this process (the client) per request.
    client_cpu: Duration,
}

/// `connections` loops of sequential `GET /small` for the warm-up and `seconds`.
async fn forward_round(
    path: &Route,
    target_pid: u32,
    connections: usize,
    seconds: Duration,
) -> Result<Round, String> {
    let start = tokio::time::Instant::now() + WARMUP;
    let end = start + seconds;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let port = path.port;
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(port).await?;
            let mut lat = Vec::with_capacity(1 << 16);
            let mut errors = 0usize;
            loop {
                let t = tokio::time::Instant::now();
                if t >= end {
                    break;
                }
                match conn.get("/small").await {
                    Ok(n) if n == SMALL_BYTES => {
                        if t >= start {
                            lat.push(t.elapsed().as_nanos() as u64);
                        }
                    }
                    Ok(n) => return Err(format!("/small: {n} bytes instead of {SMALL_BYTES}")),
                    Err(e) => {
                        errors += 1;
                        if errors > 100 {
                            return Err(format!("port {port}: {e} (and 100 errors before)"));
                        }
                        conn = Conn::open(port).await?;
                    }
                }
            }
            Ok::<_, String>((lat, errors))
        }));
    }
    tokio::time::sleep_until(start).await;
    let (proxy0, target0, client0) = (cpu_of(&path.pids), cpu_of(&[target_pid]), util::cpu_self());
    let t0 = Instant::now();
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.map_err(|e| e.to_string())??;
        all.extend(lat);
        errors += e;
    }
    let elapsed = t0.elapsed();
    let (proxy1, target1, client1) = (cpu_of(&path.pids), cpu_of(&[target_pid]), util::cpu_self());
    if all.is_empty() {
        return Err(format!("{}: no request completed", path.label));
    }
    let requests = all.len();
    let per = |d: Duration| d / requests as u32;
    Ok(Round {
        requests,
        errors,
        rps: requests as f64 / elapsed.as_secs_f64(),
        stats: Stats::of(all),
        proxy_cpu: (!path.pids.is_empty()).then(|| per(proxy1.saturating_sub(proxy0))),
        target_cpu: per(target1.saturating_sub(target0)),
        client_cpu: per(client1.saturating_sub(client0)),
    })
}

/// One GET of each document, their lengths checked (the page may grow by the injected
/// script).
async fn check(port: u16) -> Result<(), String> {
    let mut conn = Conn::open(port).await?;
    let small = conn
        .get("/small")
        .await
        .map_err(|e| format!("/small: {e}"))?;
    let page = conn.get("/page").await.map_err(|e| format!("/page: {e}"))?;
    if small != SMALL_BYTES || page < PAGE_BYTES {
        return Err(format!(
            "/small gave {small} bytes (expected {SMALL_BYTES}), /page {page} (at least \
             {PAGE_BYTES})"
        ));
    }
    Ok(())
}

/// `n` sequential GETs of the page on one connection after a warm-up: times to last
/// byte in ns, and the body length.
async fn page_round(port: u16, n: usize) -> Result<(Vec<u64>, usize), String> {
    let mut conn = Conn::open(port).await?;
    let mut len = 0;
    for _ in 0..PAGE_WARMUP {
        len = conn.get("/page").await?;
    }
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        len = conn.get("/page").await?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    Ok((lat, len))
}

// ---------------------------------------------------------------------------------------
// The benchmark

/// A way to the target: direct, or through a proxy process.
struct Route {
    label: &'static str,
    port: u16,
    /// The proxy's processes (their descendants are added), empty for direct.
    pids: Vec<u32>,
    /// Measured in the forwarding rounds too, not only with the page.
    forward: bool,
}

impl Route {
    fn proxy(label: &'static str, proc: &Proc, port: u16) -> Route {
        eprintln!("proxy: {label} on port {port}");
        Route {
            label,
            port,
            pids: vec![proc.pid()],
            forward: true,
        }
    }
}

/// Runs the benchmark; the Markdown report.
pub fn run(corral: Result<PathBuf, String>, opts: &ProxyOpts) -> Result<String, String> {
    let dir = util::TempDir::new("proxy");
    let (target, target_port) = start_target(dir.path())?;
    eprintln!("proxy: target on port {target_port}");
    let mut paths = vec![Route {
        label: "direct",
        port: target_port,
        pids: Vec::new(),
        forward: true,
    }];
    let mut notes = Vec::new();
    let mut procs = Vec::new();
    let corral = corral.map_err(|e| notes.push(format!("Corral not measured: {e}")));
    if let Ok(c) = &corral {
        match start_corral(c, target_port, dir.path(), true) {
            Ok((p, port)) => {
                paths.push(Route::proxy(CORRAL, &p, port));
                procs.push(p);
            }
            Err(e) => notes.push(format!("Corral not measured: {e}")),
        }
    }
    match start_nginx(target_port, dir.path()) {
        Ok((p, port)) => {
            paths.push(Route::proxy(NGINX_LABEL, &p, port));
            procs.push(p);
        }
        Err(e) => notes.push(format!("nginx not measured: {e}")),
    }
    // The page only: the cost of injecting is the difference to this one.
    if let Ok(c) = &corral
        && paths[1].label == CORRAL
    {
        match start_corral(c, target_port, dir.path(), false) {
            Ok((p, port)) => {
                paths.push(Route {
                    forward: false,
                    ..Route::proxy(CORRAL_RAW, &p, port)
                });
                procs.push(p);
            }
            Err(e) => notes.push(format!("Corral with --no-inject not measured: {e}")),
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // A proxy that cannot serve both documents is left out, with a note.
    paths.retain(|p| match rt.block_on(check(p.port)) {
        Ok(()) => true,
        Err(e) => {
            notes.push(format!("{} not measured: {e}", p.label));
            false
        }
    });
    for n in &notes {
        eprintln!("proxy: {n}");
    }
    let target_pid = target.pid();
    let n = paths.len();
    let nf = paths.iter().filter(|p| p.forward).count();
    let mut rounds: Vec<Vec<Round>> = (0..nf).map(|_| Vec::new()).collect();
    let mut pages: Vec<(Vec<u64>, usize)> = (0..n).map(|_| (Vec::new(), 0)).collect();
    rt.block_on(async {
        for r in 0..opts.rounds {
            for k in 0..nf {
                let i = (k + r) % nf;
                eprintln!(
                    "proxy: round {}/{}, {}: {} connections, 1 s + {:?}",
                    r + 1,
                    opts.rounds,
                    paths[i].label,
                    opts.connections,
                    opts.seconds
                );
                let round =
                    forward_round(&paths[i], target_pid, opts.connections, opts.seconds).await?;
                eprintln!(
                    "proxy:   {} req/s, p50 {} µs",
                    util::thousands(round.rps),
                    util::us(round.stats.p50)
                );
                rounds[i].push(round);
            }
        }
        let per_round = PAGE_REQUESTS.div_ceil(opts.rounds);
        for r in 0..opts.rounds {
            for k in 0..n {
                let i = (k + r) % n;
                eprintln!(
                    "proxy: 1 MiB page, round {}/{}, {}: {per_round} GETs",
                    r + 1,
                    opts.rounds,
                    paths[i].label
                );
                let (lat, len) = page_round(paths[i].port, per_round).await?;
                pages[i].0.extend(lat);
                pages[i].1 = len;
            }
        }
        Ok::<(), String>(())
    })?;
    drop(procs);
    drop(target);

    Ok(report(&paths, rounds, pages, &notes, opts))
}

fn report(
    paths: &[Route],
    rounds: Vec<Vec<Round>>,
    pages: Vec<(Vec<u64>, usize)>,
    notes: &[String],
    opts: &ProxyOpts,
) -> String {
    let mut out = String::from("## Dev proxy (`corral-bench proxy`)\n\n");
    out += &format!(
        "Forwarding: `GET /small` (1 KiB text/plain), {} keep-alive connections, each a loop \
         of sequential requests; {} rounds of every path (1 s warm-up + {} s measured), \
         interleaved; the median round by requests/s of each path. CPU: utime + stime of \
         the process(es) over the measured window, per request.\n\n",
        opts.connections,
        opts.rounds,
        opts.seconds.as_secs_f64()
    );
    for n in notes {
        out += &format!("**{n}**\n\n");
    }
    out += "| path | req/s | p50 | p99 | proxy CPU/req | target CPU/req | client CPU/req | req/s vs. direct | req/s of each round |\n";
    out += "|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
    let medians: Vec<&Round> = rounds
        .iter()
        .map(|rs| {
            let mut sorted: Vec<&Round> = rs.iter().collect();
            sorted.sort_by(|a, b| a.rps.total_cmp(&b.rps));
            sorted[sorted.len() / 2]
        })
        .collect();
    let direct_rps = medians[0].rps;
    for (i, m) in medians.iter().enumerate() {
        let each: Vec<String> = rounds[i].iter().map(|r| util::thousands(r.rps)).collect();
        out += &format!(
            "| {} | {} | {} µs | {} µs | {} | {} µs | {} µs | {:.0}% | {} |\n",
            paths[i].label,
            util::thousands(m.rps),
            util::thousands(m.stats.p50.as_secs_f64() * 1e6),
            util::thousands(m.stats.p99.as_secs_f64() * 1e6),
            m.proxy_cpu
                .map_or_else(|| "–".to_owned(), |c| format!("{} µs", util::us(c))),
            util::us(m.target_cpu),
            util::us(m.client_cpu),
            100.0 * m.rps / direct_rps,
            each.join(" / ")
        );
    }
    let errors: usize = rounds.iter().flatten().map(|r| r.errors).sum();
    let requests: usize = rounds.iter().flatten().map(|r| r.requests).sum();
    out += &format!(
        "\n{} requests measured in all, {errors} failed (and retried on a new connection).\n",
        util::thousands(requests as f64)
    );

    // The goals, when both Corral and nginx ran.
    let find = |label: &str| paths.iter().position(|p| p.label == label);
    if let Some(c) = find(CORRAL) {
        let share = medians[c].rps / direct_rps;
        out += &format!(
            "\nGoal ≥ {:.0}% of direct requests/s: Corral {:.0}%, **{}**.",
            GOAL_RPS_SHARE * 100.0,
            share * 100.0,
            if share >= GOAL_RPS_SHARE {
                "met"
            } else {
                "not met"
            }
        );
        if let (Some(cc), Some(nc)) = (
            medians[c].proxy_cpu,
            find(NGINX_LABEL).and_then(|x| medians[x].proxy_cpu),
        ) {
            out += &format!(
                " CPU per request below nginx's: Corral {} µs, nginx {} µs ({:.2}×), **{}**.",
                util::us(cc),
                util::us(nc),
                cc.as_secs_f64() / nc.as_secs_f64(),
                if cc < nc { "met" } else { "not met" }
            );
        }
        out += "\n";
    }

    out += &format!(
        "\n### 1 MiB HTML page: time to last byte\n\n`GET /page` (1,048,576 bytes of \
         text/html), one connection, {} sequential requests per path in {} interleaved \
         rounds (after {PAGE_WARMUP} warm-up requests each). Corral injects its script into \
         the page (the default); nginx passes it unchanged, and so does a second Corral \
         proxy started with `--no-inject` (measured with the page only).\n\n",
        pages[0].0.len(),
        opts.rounds
    );
    out += "| path | body bytes | p50 | p99 | p50 added vs. direct | p99 added vs. direct |\n";
    out += "|---|---:|---:|---:|---:|---:|\n";
    let stats: Vec<Stats> = pages.iter().map(|(l, _)| Stats::of(l.clone())).collect();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    let added = |a: Duration, b: Duration| {
        let d = a.as_secs_f64() - b.as_secs_f64();
        format!("{:+.2} ms", d * 1e3)
    };
    for (i, s) in stats.iter().enumerate() {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            paths[i].label,
            util::thousands(pages[i].1 as f64),
            ms(s.p50),
            ms(s.p99),
            if i == 0 {
                "–".to_owned()
            } else {
                added(s.p50, stats[0].p50)
            },
            if i == 0 {
                "–".to_owned()
            } else {
                added(s.p99, stats[0].p99)
            },
        );
    }
    if let Some(c) = find(CORRAL) {
        if pages[c].1 == pages[0].1 {
            out += "\n**Corral's page is as long as the target's: nothing was injected.**\n";
        }
        if let Some(raw) = find(CORRAL_RAW) {
            out += &format!(
                "\nAdded latency of injecting (Corral − Corral `--no-inject`): {} at p50, {} \
                 at p99.\n",
                added(stats[c].p50, stats[raw].p50),
                added(stats[c].p99, stats[raw].p99)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_their_sizes() {
        assert_eq!(small_body().len(), SMALL_BYTES);
        let page = String::from_utf8(page_body()).unwrap();
        assert_eq!(page.len(), PAGE_BYTES);
        assert!(page.starts_with("<!doctype html>\n<html><head><title>t</title></head>"));
        assert!(page.ends_with("</body></html>\n"));
    }
}

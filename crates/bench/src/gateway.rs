//! The gateway: one `tools/call` of the fixture's `echo` through `corral mcp
//! --standalone` (stdio), `corral up` (Streamable HTTP) and the default `corral mcp`
//! (a bridge to the daemon `corral up` runs), against the fixture called directly by a
//! bare client: sequential latency, throughput at 1, 8 and 32 calls in flight (HTTP:
//! sessions), the gateway's CPU per forwarded call, and its idle RSS with 1 and 10
//! servers.
//!
//! The paths run side by side (three fixture children: one bare, one under `mcp
//! --standalone`, one under the daemon, which serves both HTTP and the bridge) and are
//! measured in interleaved blocks, so that drift in the machine's state hits them alike.
//! Only ratios within one run are meaningful.

use crate::account::{Acc, Fig, Memory, Pids};
use crate::mcp::{HttpGateway, LineClient, concurrent_sessions, fixture_child, write_config};
use crate::util::{self, TempDir, us};
use std::path::Path;
use std::time::{Duration, Instant};

/// Warm-up calls per path (fewer if they take longer than [`WARMUP_MAX`]).
const WARMUP: usize = 1_000;
const WARMUP_MAX: Duration = Duration::from_secs(2);
/// Sequential calls per block.
const BLOCK: usize = 1_000;
/// Longest the sequential phase may take; fewer (or smaller) blocks if the warm-up says
/// the requested calls would take longer.
const SEQ_BUDGET: Duration = Duration::from_secs(30);
/// Calls in flight (stdio, direct) or concurrent sessions (HTTP) in the throughput runs.
pub const LEVELS: [usize; 3] = [1, 8, 32];
/// Rounds of each throughput point, interleaved with the other paths.
const ROUNDS: usize = 2;
/// Idle time before the RSS is read.
const IDLE: Duration = Duration::from_secs(2);
/// Servers configured for the idle-RSS figure.
const RSS_SERVERS: usize = 10;
/// The whole `gateway` run normally takes about a minute; past this, something hangs
/// and the bench kills every process group it started and exits.
const WATCHDOG: Duration = Duration::from_secs(300);
/// Issue 8's target for the gateway's CPU per forwarded call.
const CPU_TARGET: Duration = Duration::from_micros(15);

/// Settings of the `gateway` benchmark.
pub struct GatewayOpts {
    /// Sequential calls per path.
    pub calls: usize,
    /// Duration of one round of one throughput point.
    pub point: Duration,
}

/// The paths measured.
const ROUTES: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// The bare client on a fixture child.
    Direct,
    /// `corral mcp --standalone`.
    Stdio,
    /// `corral up`, one session per connection.
    Http,
    /// `corral mcp` (the default): a bridge process relaying stdio to the daemon that
    /// `corral up` runs, over its control socket.
    Bridge,
}

impl Route {
    const ALL: [Route; ROUTES] = [Route::Direct, Route::Stdio, Route::Http, Route::Bridge];

    fn label(self) -> &'static str {
        match self {
            Route::Direct => "direct (bare client)",
            Route::Stdio => "gateway, stdio (`mcp --standalone`)",
            Route::Http => "gateway, HTTP (`up`)",
            Route::Bridge => "gateway, stdio via daemon (`mcp` bridge)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Stdio => "stdio",
            Route::Http => "HTTP",
            Route::Bridge => "bridge",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The order of the paths in sequential block `b`: rotated by `b`, and reversed every
/// other cycle, so that every path takes every position equally often.
fn block_order(b: usize) -> [Route; ROUTES] {
    let mut order = Route::ALL;
    order.rotate_left(b % ROUTES);
    if (b / ROUTES) % 2 == 1 {
        order.reverse();
    }
    order
}

// ---------------------------------------------------------------------------------------
// The benchmark

/// The accounting of one gateway process with exactly one fixture child.
fn one_gateway(pid: u32) -> Result<Pids, String> {
    fixture_child(pid)?;
    Ok(Pids::gateway(&[pid]))
}

/// Runs every part and renders the tables.
pub fn run(fixture: &Path, corral: &Path, opts: &GatewayOpts) -> Result<String, String> {
    let started = Instant::now();
    crate::procs::install_cleanup(WATCHDOG, "gateway");
    let dir = TempDir::new("gateway");
    let config = write_config(dir.path(), fixture, &["fx".to_owned()])?;
    let cfg = config.to_string_lossy().into_owned();

    eprintln!(
        "gateway: starting the bare fixture, `corral mcp --standalone`, `corral up` and a `corral mcp` bridge"
    );
    let mut direct = LineClient::start(fixture, &[], "echo")?;
    let mut stdio = LineClient::start(corral, &["-c", &cfg, "mcp", "--standalone"], "fx__echo")?;
    // The daemon first, so that the bridge connects to it instead of starting its own.
    let http = HttpGateway::start(corral, &config)?;
    let mut bridge = LineClient::start(corral, &["-c", &cfg, "mcp"], "fx__echo")?;
    let mut sessions = (0..LEVELS[LEVELS.len() - 1])
        .map(|_| http.session("fx__echo"))
        .collect::<Result<Vec<_>, _>>()?;

    // Warm-up; its first calls also wait for the gateways' servers to be ready.
    eprintln!("gateway: warm-up, up to {WARMUP} calls or {WARMUP_MAX:?} per path");
    let mut per_call = [Duration::ZERO; ROUTES];
    for route in Route::ALL {
        let t0 = Instant::now();
        let mut done = 0;
        while done < WARMUP && t0.elapsed() < WARMUP_MAX {
            match route {
                Route::Direct => direct.sequential(10)?,
                Route::Stdio => stdio.sequential(10)?,
                Route::Http => sessions[0].sequential(10)?,
                Route::Bridge => bridge.sequential(10)?,
            };
            done += 10;
        }
        per_call[route.index()] = t0.elapsed() / done as u32;
    }
    let pids = [
        Pids::direct(direct.pid()),
        one_gateway(stdio.pid())?,
        one_gateway(http.pid())?,
        Pids::gateway(&[bridge.pid(), http.pid()]),
    ];

    // Sequential latency, in blocks that rotate the order of the paths.
    let round_trip: Duration = per_call.iter().sum();
    let wanted_blocks = opts.calls.div_ceil(BLOCK);
    let (blocks, block) = if round_trip * BLOCK as u32 * wanted_blocks as u32 <= SEQ_BUDGET {
        (wanted_blocks, BLOCK)
    } else if round_trip * BLOCK as u32 <= SEQ_BUDGET {
        (
            (SEQ_BUDGET.as_secs_f64() / (round_trip * BLOCK as u32).as_secs_f64()) as usize,
            BLOCK,
        )
    } else {
        let block = (SEQ_BUDGET.as_secs_f64() / round_trip.as_secs_f64()) as usize;
        (1, block.max(20))
    };
    let warm: Vec<String> = Route::ALL
        .iter()
        .map(|r| format!("{} {}", r.short(), us(per_call[r.index()])))
        .collect();
    eprintln!(
        "gateway: sequential, {blocks} blocks of {block} calls per path, interleaved \
         (warm-up µs per call: {})",
        warm.join(", ")
    );
    // One vCPU for the whole sequential phase (see `pin_to_one_cpu`).
    let gateways = [direct.pid(), stdio.pid(), http.pid(), bridge.pid()];
    let unpin = util::pin_to_one_cpu(&gateways);
    let mut seq: [Acc; ROUTES] = Default::default();
    for b in 0..blocks {
        for route in block_order(b) {
            let i = route.index();
            seq[i].measure(&pids[i], || match route {
                Route::Direct => direct.sequential(block),
                Route::Stdio => stdio.sequential(block),
                Route::Http => sessions[0].sequential(block),
                Route::Bridge => bridge.sequential(block),
            })?;
        }
    }
    if let Some(mask) = unpin {
        util::set_affinity(&gateways, &mask);
    }
    let seq = seq.map(Acc::finish);

    // Throughput: each load level in ROUNDS interleaved rounds.
    eprintln!(
        "gateway: throughput at {LEVELS:?} in flight / sessions, {ROUNDS} × {:?} per point",
        opts.point
    );
    let mut tput: Vec<[Fig; ROUTES]> = Vec::new();
    for level in LEVELS {
        let mut acc: [Acc; ROUTES] = Default::default();
        for round in 0..ROUNDS {
            let mut order = Route::ALL;
            if round % 2 == 1 {
                order.reverse();
            }
            for route in order {
                let i = route.index();
                acc[i].measure(&pids[i], || match route {
                    Route::Direct => direct.pipelined(level, opts.point),
                    Route::Stdio => stdio.pipelined(level, opts.point),
                    Route::Http => concurrent_sessions(&mut sessions[..level], opts.point),
                    Route::Bridge => bridge.pipelined(level, opts.point),
                })?;
            }
        }
        tput.push(acc.map(Acc::finish));
    }

    // Memory of the loaded gateways, then stop everything before the idle runs.
    let loaded = Loaded {
        stdio: Memory::of(stdio.pid())?,
        daemon: Memory::of(http.pid())?,
        bridge: Memory::of(bridge.pid())?,
    };
    eprintln!("gateway: stopping; idle RSS with 1 and {RSS_SERVERS} servers");
    drop(sessions);
    bridge.stop();
    direct.stop();
    stdio.stop();
    http.stop();
    let idle1 = idle_memory(fixture, corral, 1)?;
    let idle10 = idle_memory(fixture, corral, RSS_SERVERS)?;
    eprintln!("gateway: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(render(
        blocks * block,
        block,
        opts.point,
        &seq,
        &tput,
        &loaded,
        &idle1,
        &idle10,
    ))
}

/// Memory of the gateway processes after the load runs.
struct Loaded {
    stdio: Memory,
    daemon: Memory,
    bridge: Memory,
}

/// `gateway-profile stdio|http|http-2026 N SECS`: starts one gateway, warms it up, prints its pid to
/// stderr, waits [`PROFILE_ATTACH`] (time to attach `perf record -p PID`), then keeps N
/// calls in flight (HTTP: N sessions; `http-2026`: N stateless 2026-07-28 clients) for SECS seconds and prints calls/s and the
/// gateway's CPU per call. A helper for profiling, not a benchmark.
pub fn profile(
    fixture: &Path,
    corral: &Path,
    route: &str,
    n: usize,
    secs: Duration,
) -> Result<String, String> {
    let dir = TempDir::new("gateway-profile");
    let config = write_config(dir.path(), fixture, &["fx".to_owned()])?;
    let cfg = config.to_string_lossy().into_owned();
    let mut acc = Acc::default();
    match route {
        "stdio" => {
            let mut c =
                LineClient::start(corral, &["-c", &cfg, "mcp", "--standalone"], "fx__echo")?;
            c.sequential(WARMUP)?;
            let pids = one_gateway(c.pid())?;
            eprintln!("gateway-profile: `corral mcp` pid {}", c.pid());
            std::thread::sleep(PROFILE_ATTACH);
            acc.measure(&pids, || c.pipelined(n, secs))?;
            c.stop();
        }
        "http" | "http-2026" => {
            let gw = HttpGateway::start(corral, &config)?;
            let mut sessions = (0..n)
                .map(|_| match route {
                    "http" => gw.session("fx__echo"),
                    _ => Ok(gw.stateless("fx__echo")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            for s in &mut sessions {
                s.sequential(WARMUP / n.max(1))?;
            }
            let pids = one_gateway(gw.pid())?;
            eprintln!("gateway-profile: `corral up` pid {}", gw.pid());
            std::thread::sleep(PROFILE_ATTACH);
            acc.measure(&pids, || concurrent_sessions(&mut sessions, secs))?;
            drop(sessions);
            gw.stop();
        }
        other => return Err(format!("gateway-profile: unknown route {other:?}")),
    }
    let f = acc.finish();
    Ok(format!(
        "{route}, {n} in flight, {:.1} s: {} calls/s, p50 {} µs, gateway CPU/call {} µs, \
         fixture CPU/call {} µs, client CPU/call {} µs",
        secs.as_secs_f64(),
        util::thousands(f.calls_per_sec),
        us(f.stats.p50),
        us(f.gateway_cpu),
        us(f.fixture_cpu),
        us(f.client_cpu)
    ))
}

/// How long `gateway-profile` waits after printing the gateway's pid.
const PROFILE_ATTACH: Duration = Duration::from_secs(1);

/// `corral up` with `n` fixture servers: once every server's tools are listed (one
/// session, then ended with DELETE) and after [`IDLE`], the memory of the gateway.
fn idle_memory(fixture: &Path, corral: &Path, n: usize) -> Result<Memory, String> {
    let dir = TempDir::new("gateway-idle");
    let names: Vec<String> = (0..n).map(|i| format!("fx{i}")).collect();
    let config = write_config(dir.path(), fixture, &names)?;
    let gw = HttpGateway::start(corral, &config)?;
    let mut s = gw.session("fx0__echo")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = s.tools_list()?;
        if names
            .iter()
            .all(|n| list.contains(&format!(r#""{n}__echo""#)))
        {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not every server's tools were listed within 30 s: {}",
                list.chars().take(300).collect::<String>()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    s.call()?;
    let r = s.conn.delete()?;
    if !(200..300).contains(&r.status) {
        eprintln!("gateway: DELETE of the session answered {}", r.status);
    }
    drop(s);
    std::thread::sleep(IDLE);
    let m = Memory::of(gw.pid())?;
    if m.fixtures != n {
        eprintln!(
            "gateway: expected {n} fixture children, found {}",
            m.fixtures
        );
    }
    gw.stop();
    Ok(m)
}

#[allow(clippy::too_many_arguments)]
fn render(
    seq_calls: usize,
    block: usize,
    point: Duration,
    seq: &[Fig; ROUTES],
    tput: &[[Fig; ROUTES]],
    loaded: &Loaded,
    idle1: &Memory,
    idle10: &Memory,
) -> String {
    let secs = |d: Duration| d.as_secs_f64();
    let ratio = |a: f64, b: f64| format!("{:.2}×", a / b);
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let gw_cpu = |route: Route, f: &Fig| {
        if route == Route::Direct {
            "—".to_owned()
        } else {
            us(f.gateway_cpu)
        }
    };
    let churn: usize = seq
        .iter()
        .chain(tput.iter().flatten())
        .map(|f| f.thread_churn)
        .sum();
    let gateways = &Route::ALL[1..];

    let mut out = format!(
        "## Gateway: `tools/call` through `corral mcp` and `corral up`\n\n\
         The fixture's `echo` (`{{\"text\":\"hello\"}}`) called four ways, side by side:\n\n\
         - **direct**: a bare blocking client on a fixture child's pipes (the floor);\n\
         - **stdio**: `corral mcp --standalone` (tool `fx__echo`), newline-delimited \
         JSON-RPC on its stdin/stdout;\n\
         - **HTTP**: `corral up` (the daemon, bearer token on), one keep-alive TCP \
         connection per MCP session with `TCP_NODELAY`, each call a `POST /mcp` answered \
         with `application/json`;\n\
         - **bridge**: `corral mcp` without `--standalone` (what agents run by default), \
         which relays its stdio to that same daemon over the control socket; its CPU is the \
         bridge's plus the daemon's.\n\n\
         Absolute µs swing by up to 10× with CPU idle states on this VM; only ratios within \
         one run mean something.\n\n\
         ### Sequential latency\n\n\
         {seq_calls} calls per path, one at a time, in blocks of {block} whose order rotates \
         (every path in every position equally often), after a warm-up, with this client \
         and every process of every path pinned to one vCPU (left to the scheduler, a \
         path runs either on one vCPU or split across two, ≈ 70–80 µs apart per call on \
         this VM, depending on what ran before it). Times in µs. CPU \
         per call: gateway and fixture from `/proc/<pid>/task/*/schedstat`, this client \
         from `getrusage`.\n\n\
         | path | p50 | p99 | p99.9 | mean | calls/s | gateway CPU/call | fixture CPU/call | client CPU/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for route in Route::ALL {
        let f = &seq[route.index()];
        let s = &f.stats;
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            route.label(),
            us(s.p50),
            us(s.p99),
            us(s.p999),
            us(s.mean),
            util::thousands(f.calls_per_sec),
            gw_cpu(route, f),
            us(f.fixture_cpu),
            us(f.client_cpu),
        );
    }
    let d = &seq[0];
    let header: Vec<&str> = gateways.iter().map(|r| r.short()).collect();
    out += &format!(
        "\n| vs. direct | {} |\n|---|{}\n",
        header.join(" | "),
        "---:|".repeat(gateways.len())
    );
    let line = |label: &str, f: &dyn Fn(&Fig) -> String| {
        let cells: Vec<String> = gateways.iter().map(|r| f(&seq[r.index()])).collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    out += &line("p50 ratio", &|g| {
        ratio(secs(g.stats.p50), secs(d.stats.p50))
    });
    out += &line("p99 ratio", &|g| {
        ratio(secs(g.stats.p99), secs(d.stats.p99))
    });
    out += &line("p50 added (µs)", &|g| {
        format!("{:+.1}", (secs(g.stats.p50) - secs(d.stats.p50)) * 1e6)
    });
    out += &line("calls/s ratio", &|g| {
        ratio(g.calls_per_sec, d.calls_per_sec)
    });

    out += &format!(
        "\n### Throughput\n\n\
         Direct, stdio and bridge: one client thread keeps N calls outstanding on one \
         connection (pipelined, answers matched by id). HTTP: N sessions, each on its own \
         connection and its own thread, each making sequential calls. Every point runs \
         {ROUNDS} × {:.1} s, interleaved with the other paths (order reversed in the second \
         round). p50/p99 include the wait behind the other calls in flight. The client, the \
         gateway and the fixture share the machine's {} vCPUs.\n\n\
         | path | N in flight (HTTP: sessions) | calls/s | vs. direct | p50 | p99 | gateway CPU/call | fixture CPU/call | client CPU/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        secs(point),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for (level, figs) in LEVELS.iter().zip(tput) {
        for route in Route::ALL {
            let f = &figs[route.index()];
            out += &format!(
                "| {} | {level} | {} | {} | {} | {} | {} | {} | {} |\n",
                route.label(),
                util::thousands(f.calls_per_sec),
                ratio(f.calls_per_sec, figs[0].calls_per_sec),
                us(f.stats.p50),
                us(f.stats.p99),
                gw_cpu(route, f),
                us(f.fixture_cpu),
                us(f.client_cpu),
            );
        }
    }

    let level_of = |n: usize| LEVELS.iter().position(|&l| l == n).expect("a level");
    let at = |n: usize, r: Route| &tput[level_of(n)][r.index()];
    let stdio32 = at(32, Route::Stdio);
    let http8 = at(8, Route::Http);
    let verdict = |d: Duration| if d <= CPU_TARGET { "yes" } else { "**no**" };
    out += &format!(
        "\n### CPU per forwarded call\n\n\
         The gateway's CPU (all threads; for the bridge, the bridge process plus the daemon) \
         ÷ calls forwarded, excluding the fixture child. Issue 8's target: ≤ {} µs.\n\n\
         | gateway | load | CPU/call (µs) | ≤ {} µs |\n|---|---|---:|---|\n",
        CPU_TARGET.as_micros(),
        CPU_TARGET.as_micros(),
    );
    let rows: [(Route, &str, &Fig); 8] = [
        (Route::Stdio, "sequential", &seq[Route::Stdio.index()]),
        (Route::Stdio, "32 in flight", stdio32),
        (Route::Http, "sequential", &seq[Route::Http.index()]),
        (Route::Http, "8 sessions", http8),
        (Route::Http, "32 sessions", at(32, Route::Http)),
        (Route::Bridge, "sequential", &seq[Route::Bridge.index()]),
        (Route::Bridge, "8 in flight", at(8, Route::Bridge)),
        (Route::Bridge, "32 in flight", at(32, Route::Bridge)),
    ];
    for (route, load, f) in rows {
        out += &format!(
            "| {} | {load} | {} | {} |\n",
            route.short(),
            us(f.gateway_cpu),
            verdict(f.gateway_cpu)
        );
    }
    if churn > 0 {
        out += &format!(
            "\n_The gateway's set of threads changed during {churn} measured block(s) (tokio's \
             blocking pool starts and ends threads); for those blocks the gateway's CPU comes \
             from `/proc/<pid>/stat` (clock-tick resolution, but it counts exited threads)._\n"
        );
    }

    out += &format!(
        "\n### Memory\n\n\
         `VmRSS` / `VmHWM` of the gateway process from `/proc/<pid>/status`. Idle: `corral \
         up` with the servers configured, after one session listed every server's tools, \
         called `echo` once and ended (DELETE), then {:.0} s idle. Its children are listed \
         apart: the fixtures (sum of their `VmRSS`) and the other children (Corral's guard \
         process).\n\n\
         | gateway | state | VmRSS MiB | VmHWM MiB | threads | fixtures | fixtures' VmRSS MiB | other children's VmRSS MiB |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
        secs(IDLE)
    );
    let mem_row = |gw: &str, state: &str, m: &Memory| {
        format!(
            "| {gw} | {state} | {} | {} | {} | {} | {} | {} |\n",
            mib(m.rss_kib),
            mib(m.hwm_kib),
            m.threads,
            m.fixtures,
            mib(m.fixtures_rss_kib),
            mib(m.other_children_rss_kib),
        )
    };
    out += &mem_row("`corral up`", "idle, 1 server", idle1);
    out += &mem_row(
        "`corral up`",
        &format!("idle, {RSS_SERVERS} servers"),
        idle10,
    );
    out += &mem_row(
        "`corral up`",
        &format!(
            "after the runs above ({} HTTP sessions + 1 bridge open)",
            LEVELS[LEVELS.len() - 1]
        ),
        &loaded.daemon,
    );
    out += &mem_row(
        "`corral mcp --standalone`",
        "after the runs above",
        &loaded.stdio,
    );
    out += &mem_row(
        "`corral mcp` (bridge)",
        "after the runs above",
        &loaded.bridge,
    );
    out += &format!(
        "\nPer extra server, idle: {:+.2} MiB in the gateway.\n",
        (idle10.rss_kib as f64 - idle1.rss_kib as f64) / 1024.0 / (RSS_SERVERS - 1) as f64
    );

    let stdio_seq = &seq[Route::Stdio.index()];
    let http_seq = &seq[Route::Http.index()];
    let direct32 = at(32, Route::Direct);
    let checks = [
        (
            format!(
                "stdio p50 ≤ 2× direct: {}",
                ratio(secs(stdio_seq.stats.p50), secs(d.stats.p50))
            ),
            stdio_seq.stats.p50 <= d.stats.p50 * 2,
        ),
        (
            format!(
                "HTTP p50 ≤ 3× direct: {}",
                ratio(secs(http_seq.stats.p50), secs(d.stats.p50))
            ),
            http_seq.stats.p50 <= d.stats.p50 * 3,
        ),
        (
            format!(
                "stdio throughput at 32 in flight ≥ 70% of direct: {:.0}%",
                stdio32.calls_per_sec / direct32.calls_per_sec * 100.0
            ),
            stdio32.calls_per_sec >= 0.7 * direct32.calls_per_sec,
        ),
        (
            format!(
                "gateway CPU per call ≤ {} µs (stdio 32 in flight / HTTP 8 sessions): {} / {} µs",
                CPU_TARGET.as_micros(),
                us(stdio32.gateway_cpu),
                us(http8.gateway_cpu)
            ),
            stdio32.gateway_cpu <= CPU_TARGET && http8.gateway_cpu <= CPU_TARGET,
        ),
    ];
    out += "\n### Checks\n\n";
    for (text, ok) in checks {
        out += &format!("- {}: {text}\n", if ok { "ok" } else { "**over**" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_orders_put_every_path_in_every_position_equally() {
        let mut count = [[0; ROUTES]; ROUTES];
        for b in 0..2 * ROUTES {
            for (pos, r) in block_order(b).iter().enumerate() {
                count[r.index()][pos] += 1;
            }
        }
        assert!(count.iter().flatten().all(|&c| c == 2), "{count:?}");
    }
}

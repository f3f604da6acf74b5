//! `revisions`: the same `tools/call` over Streamable HTTP as a 2025 session client
//! (`initialize` once, then `Mcp-Session-Id` on every POST) and as a stateless
//! 2026-07-28 client (no session; every request carries the `_meta` claim and the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, which Corral checks
//! against the body), against one `corral up`. What it answers: whether the stateless
//! path costs more than the session path.
//!
//! Both kinds of client talk to the same daemon and the same fixture child, in
//! interleaved blocks (sequential) and rounds (8 clients), so drift in the machine's
//! state hits them alike.

use crate::account::{Acc, Fig, Pids};
use crate::mcp::{HttpGateway, Session, concurrent_sessions, fixture_child, write_config};
use crate::util::{self, TempDir, us};
use std::path::Path;
use std::time::Duration;

/// Sequential calls per block, and blocks per kind of client.
const BLOCK: usize = 1_000;
const BLOCKS: usize = 10;
/// Concurrent clients of each kind in the throughput rounds.
const CLIENTS: usize = 8;
/// Throughput rounds per kind, alternating which goes first.
const ROUNDS: usize = 4;
/// Past this the run hangs: every process group is killed.
const WATCHDOG: Duration = Duration::from_secs(300);

/// Runs both clients and renders the table.
pub fn run(fixture: &Path, corral: &Path, point: Duration) -> Result<String, String> {
    crate::procs::install_cleanup(WATCHDOG, "revisions");
    let dir = TempDir::new("revisions");
    let config = write_config(dir.path(), fixture, &["fx".to_owned()])?;
    let gw = HttpGateway::start(corral, &config)?;
    let mut legacy = (0..CLIENTS)
        .map(|_| gw.session("fx__echo"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut stateless: Vec<Session> = (0..CLIENTS).map(|_| gw.stateless("fx__echo")).collect();
    // Warm-up; the first calls also wait for the server to be ready.
    for s in legacy.iter_mut().chain(stateless.iter_mut()) {
        s.sequential(100)?;
    }
    fixture_child(gw.pid())?;
    let pids = Pids::gateway(&[gw.pid()]);

    eprintln!("revisions: sequential, {BLOCKS} blocks of {BLOCK} calls per kind, interleaved");
    let unpin = util::pin_to_one_cpu(&[gw.pid()]);
    let mut seq = [Acc::default(), Acc::default()];
    for b in 0..BLOCKS {
        for k in util::alternate(b) {
            let client = if k == 0 {
                &mut legacy[0]
            } else {
                &mut stateless[0]
            };
            seq[k].measure(&pids, || client.sequential(BLOCK))?;
        }
    }
    if let Some(mask) = unpin {
        util::set_affinity(&[gw.pid()], &mask);
    }

    eprintln!("revisions: {CLIENTS} clients of each kind, {ROUNDS} × {point:?}, interleaved");
    let mut tput = [Acc::default(), Acc::default()];
    for r in 0..ROUNDS {
        for k in util::alternate(r) {
            let clients = if k == 0 { &mut legacy } else { &mut stateless };
            tput[k].measure(&pids, || concurrent_sessions(clients, point))?;
        }
    }
    drop((legacy, stateless));
    gw.stop();
    Ok(render(&seq.map(Acc::finish), &tput.map(Acc::finish), point))
}

fn render(seq: &[Fig; 2], tput: &[Fig; 2], point: Duration) -> String {
    let mut out = format!(
        "## MCP revisions over HTTP: a 2025 session call and a 2026-07-28 stateless call\n\n\
         The fixture's `echo` through one `corral up`, from a 2025-11-25 session client \
         (`initialize` once, `Mcp-Session-Id` on every POST) and a 2026-07-28 stateless \
         client (no session; the `_meta` claim and the `MCP-Protocol-Version`, \
         `Mcp-Method`, `Mcp-Name` headers on every POST). One keep-alive connection per \
         client. Sequential: {BLOCKS} × {BLOCK} calls per kind in alternating blocks, the \
         daemon pinned to one vCPU. Throughput: {CLIENTS} clients of a kind at once, \
         {ROUNDS} alternating rounds of {:.1} s. Times in µs; gateway CPU from \
         `/proc/<pid>/task/*/schedstat`.\n\n\
         | client | p50 | p99 | calls/s (1 client) | gateway CPU/call (1) | p50 ({CLIENTS} clients) | calls/s ({CLIENTS} clients) | gateway CPU/call ({CLIENTS}) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        point.as_secs_f64()
    );
    for (k, label) in ["2025-11-25 session", "2026-07-28 stateless"]
        .iter()
        .enumerate()
    {
        let (s, t) = (&seq[k], &tput[k]);
        out += &format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |\n",
            us(s.stats.p50),
            us(s.stats.p99),
            util::thousands(s.calls_per_sec),
            us(s.gateway_cpu),
            us(t.stats.p50),
            util::thousands(t.calls_per_sec),
            us(t.gateway_cpu),
        );
    }
    out
}

//! CPU and memory accounting of a gateway under load, shared by `gateway` and `peers`:
//! the gateway's own processes (all threads), the servers under it (its `corral-fixture`
//! descendants, plus the CPU of the children it reaped during the measurement: a gateway
//! that starts a server per request), and this client.

use crate::util::{self, Stats};
use std::time::{Duration, Instant};

/// The processes on one path, for CPU deltas.
#[derive(Clone, Debug)]
pub struct Pids {
    /// The gateway's processes: none (direct), one, or the bridge and the daemon.
    pub gateway: Vec<u32>,
    /// Direct path only: the fixture itself. Otherwise the servers are the gateway's
    /// descendants, looked up at the start of every measurement.
    pub server: Option<u32>,
}

impl Pids {
    pub fn direct(fixture: u32) -> Pids {
        Pids {
            gateway: Vec::new(),
            server: Some(fixture),
        }
    }

    /// Every process of the path that is not the client: the gateway's processes (their
    /// descendants follow them) or, direct, the fixture.
    pub fn all(&self) -> Vec<u32> {
        self.gateway.iter().copied().chain(self.server).collect()
    }

    /// Gateway processes; their descendants are the servers.
    pub fn gateway(pids: &[u32]) -> Pids {
        Pids {
            gateway: pids.to_vec(),
            server: None,
        }
    }

    /// The server processes now: the fixture (direct), else every `corral-fixture`
    /// descendant of the gateway processes.
    fn servers(&self) -> Vec<u32> {
        if let Some(s) = self.server {
            return vec![s];
        }
        let mut out = Vec::new();
        for &g in &self.gateway {
            for (pid, comm) in util::descendants_of(g) {
                if comm == "corral-fixture" && !out.contains(&pid) {
                    out.push(pid);
                }
            }
        }
        out
    }
}

struct Snapshot {
    gateway: Duration,
    gateway_ticks: Duration,
    gateway_tasks: Vec<u32>,
    /// CPU of each server process (by pid), and of the gateway's reaped children.
    servers: Vec<(u32, Duration)>,
    reaped: Duration,
    client: Duration,
}

impl Snapshot {
    fn take(p: &Pids, servers: &[u32], client_first: bool) -> Snapshot {
        let client_before = client_first.then(util::cpu_self);
        let pids = p.gateway.iter().copied();
        let mut s = Snapshot {
            gateway: pids.clone().filter_map(util::proc_cpu).sum(),
            gateway_ticks: pids.clone().filter_map(util::proc_stat_cpu).sum(),
            gateway_tasks: pids.clone().flat_map(util::task_ids).collect(),
            servers: servers
                .iter()
                .filter_map(|&pid| Some((pid, util::proc_cpu(pid)?)))
                .collect(),
            reaped: pids.filter_map(util::proc_children_cpu).sum(),
            client: Duration::ZERO,
        };
        s.client = client_before.unwrap_or_else(util::cpu_self);
        s
    }
}

/// Accumulated measurements of one path at one load.
#[derive(Default)]
pub struct Acc {
    pub samples: Vec<u64>,
    pub wall: Duration,
    gateway_cpu: Duration,
    server_cpu: Duration,
    client_cpu: Duration,
    /// Blocks during which the gateway's set of threads changed: the per-thread sums
    /// lose the CPU of a thread that exited, so those blocks use `/proc/<pid>/stat`.
    thread_churn: usize,
}

impl Acc {
    /// Runs `f` (which returns per-call latencies in ns) and adds its figures.
    pub fn measure(
        &mut self,
        pids: &Pids,
        f: impl FnOnce() -> Result<Vec<u64>, String>,
    ) -> Result<(), String> {
        let servers = pids.servers();
        // The /proc scans sit outside the client's CPU delta: before the first reading
        // and after the second.
        let before = Snapshot::take(pids, &servers, false);
        let t0 = Instant::now();
        let samples = f()?;
        let wall = t0.elapsed();
        let after = Snapshot::take(pids, &servers, true);
        self.samples.extend(samples);
        self.wall += wall;
        if before.gateway_tasks == after.gateway_tasks {
            self.gateway_cpu += after.gateway.saturating_sub(before.gateway);
        } else {
            self.gateway_cpu += after.gateway_ticks.saturating_sub(before.gateway_ticks);
            self.thread_churn += 1;
        }
        for (pid, cpu) in &after.servers {
            if let Some((_, was)) = before.servers.iter().find(|(p, _)| p == pid) {
                self.server_cpu += cpu.saturating_sub(*was);
            }
        }
        // Servers that ended during the block (a gateway that starts one per request)
        // are in the gateway's reaped-children CPU.
        self.server_cpu += after.reaped.saturating_sub(before.reaped);
        self.client_cpu += after.client.saturating_sub(before.client);
        Ok(())
    }

    pub fn finish(self) -> Fig {
        let calls = self.samples.len().max(1);
        Fig {
            calls: self.samples.len(),
            stats: Stats::of(if self.samples.is_empty() {
                vec![0]
            } else {
                self.samples
            }),
            calls_per_sec: calls as f64 / self.wall.as_secs_f64().max(1e-9),
            gateway_cpu: self.gateway_cpu / calls as u32,
            fixture_cpu: self.server_cpu / calls as u32,
            client_cpu: self.client_cpu / calls as u32,
            thread_churn: self.thread_churn,
        }
    }
}

/// One path's figures at one load.
pub struct Fig {
    pub calls: usize,
    pub stats: Stats,
    pub calls_per_sec: f64,
    /// Per call.
    pub gateway_cpu: Duration,
    pub fixture_cpu: Duration,
    pub client_cpu: Duration,
    pub thread_churn: usize,
}

/// Memory of a gateway process and its descendants.
#[derive(Clone, Debug)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub threads: u64,
    /// `corral-fixture` descendants.
    pub fixtures: usize,
    pub fixtures_rss_kib: u64,
    /// Other descendants (Corral's guard, a shell a gateway wraps servers in, …).
    pub others: usize,
    pub other_children_rss_kib: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Result<Memory, String> {
        let field = |p: u32, f: &str| util::proc_status_field(p, f);
        let missing = || format!("cannot read /proc/{pid}/status");
        let mut m = Memory {
            rss_kib: field(pid, "VmRSS").ok_or_else(missing)?,
            hwm_kib: field(pid, "VmHWM").ok_or_else(missing)?,
            threads: field(pid, "Threads").ok_or_else(missing)?,
            fixtures: 0,
            fixtures_rss_kib: 0,
            others: 0,
            other_children_rss_kib: 0,
        };
        for (child, comm) in util::descendants_of(pid) {
            let rss = field(child, "VmRSS").unwrap_or(0);
            if comm == "corral-fixture" {
                m.fixtures += 1;
                m.fixtures_rss_kib += rss;
            } else {
                m.others += 1;
                m.other_children_rss_kib += rss;
            }
        }
        Ok(m)
    }
}

//! Shared pieces: locating binaries, server configs, CPU and memory accounting, stats.

use corral_config::{CrashLoop, RestartPolicy, ServerConfig, ToolFilter, Transport};
use corral_events::EventBus;
use corral_supervisor::SupervisorOptions;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// The fixture server, expected next to this executable (`target/release/`).
pub fn fixture_path() -> Result<PathBuf, String> {
    sibling_binary("corral-fixture", "the fixture server")
}

/// The `corral` binary (the gateway), expected next to this executable.
pub fn corral_path() -> Result<PathBuf, String> {
    sibling_binary("corral", "the gateway binary")
}

fn sibling_binary(name: &str, what: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate own executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{what} {} is missing: build it next to this binary with \
             `cargo build --release --workspace --bins`",
            path.display()
        ))
    }
}

/// The repository root: two levels above `target/<profile>/`, else where this crate was
/// compiled from.
pub fn repo_root() -> PathBuf {
    let marker = |p: &Path| p.join("tests/peers").is_dir();
    if let Some(root) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.parent()?.to_path_buf()))
        .filter(|p| marker(p))
    {
        return root;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A stdio server config for benchmarks: generous timeouts, no restarts, quiet.
pub fn server_config(name: &str, command: &Path, args: &[String], cwd: &Path) -> ServerConfig {
    ServerConfig {
        name: name.to_owned(),
        transport: Transport::Stdio {
            command: command.to_string_lossy().into_owned(),
            args: args.to_vec(),
            env: BTreeMap::new(),
            cwd: cwd.to_path_buf(),
        },
        startup_timeout: Duration::from_secs(300),
        call_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_secs(1),
        restart: RestartPolicy::Never,
        max_concurrency: None,
        tools: ToolFilter::default(),
        quiet: true,
        crash_loop: CrashLoop {
            max: 5,
            window: Duration::from_secs(60),
        },
        secrets: Vec::new(),
    }
}

/// Supervisor options with logs under `dir` (default 10 MiB rotation) and no console.
pub fn supervisor_options(dir: &Path) -> SupervisorOptions {
    SupervisorOptions::new(EventBus::new(1024), dir.join("logs"))
}

/// Worker threads of every runtime the bench builds (`--workers`).
pub static WORKERS: AtomicUsize = AtomicUsize::new(2);

/// The multi-thread runtime every supervisor run uses: [`WORKERS`] workers (2 by default,
/// like the machine the figures in BENCHMARKS.md come from).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS.load(Ordering::Relaxed).max(1))
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A unique empty directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "corral-bench-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage fills the zeroed struct we own; both arguments are valid.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// User + system CPU time of this process (all threads) so far.
pub fn cpu_self() -> Duration {
    let ru = rusage(libc::RUSAGE_SELF);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// User + system CPU time of the children this process has waited for.
pub fn cpu_children() -> Duration {
    let ru = rusage(libc::RUSAGE_CHILDREN);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Peak resident set size of this process image, in KiB: `VmHWM` from
/// `/proc/self/status`. (`getrusage`'s `ru_maxrss` is not used: Linux carries it across
/// `execve`, so a re-executed child reports at least its parent's RSS at fork time.)
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `ru_maxrss` of this process, in KiB (see [`peak_rss_kib`] for its caveat).
pub fn ru_maxrss_kib() -> u64 {
    rusage(libc::RUSAGE_SELF).ru_maxrss as u64
}

/// CPU time of a live process: the sum over its threads of the nanosecond run time in
/// `/proc/<pid>/task/*/schedstat`, else user + system from `/proc/<pid>/stat` (clock-tick
/// resolution, usually 10 ms).
pub fn proc_cpu(pid: u32) -> Option<Duration> {
    proc_schedstat(pid).or_else(|| proc_stat_cpu(pid))
}

fn proc_schedstat(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let s = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// User + system CPU of a live process from `/proc/<pid>/stat`: counts threads that have
/// exited too, at clock-tick resolution (usually 10 ms).
pub fn proc_stat_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name start at field 3 (state); utime and
    // stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / hz))
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …), in KiB; `Threads` too.
pub fn proc_status_field(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The live children of `pid` (pid and `comm`), found by scanning `/proc`.
pub fn children_of(pid: u32) -> Vec<(u32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String)> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            // After the command name: state, then ppid.
            let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pid).then_some((child, comm))
        })
        .collect();
    out.sort();
    out
}

/// The live descendants of `pid` (pid and `comm`), children first.
pub fn descendants_of(pid: u32) -> Vec<(u32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, ppid, comm) of every process.
    let all: Vec<(u32, u32, String)> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid, comm))
        })
        .collect();
    let mut out: Vec<(u32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, ppid, comm) in &all {
            if *ppid == parent && !out.iter().any(|(q, _)| q == p) {
                out.push((*p, comm.clone()));
                parents.push(*p);
            }
        }
    }
    out
}

/// User + system CPU of the children a live process has reaped (`cutime` + `cstime` of
/// `/proc/<pid>/stat`, which include their own reaped children), at clock-tick
/// resolution.
pub fn proc_children_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let cutime: u64 = fields.get(13)?.parse().ok()?;
    let cstime: u64 = fields.get(14)?.parse().ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos((cutime + cstime) * 1_000_000_000 / hz))
}

/// The thread ids of a live process.
pub fn task_ids(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Resource use of this process (all threads) and of one child, for deltas.
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    /// User + system CPU of this process.
    pub cpu: Duration,
    /// Voluntary + involuntary context switches of this process.
    pub switches: u64,
    /// CPU of the child (see [`proc_cpu`]).
    pub child_cpu: Duration,
}

impl Usage {
    /// Now, for this process and the child `pid`.
    pub fn now(pid: u32) -> Usage {
        let ru = rusage(libc::RUSAGE_SELF);
        Usage {
            cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
            switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
            child_cpu: proc_cpu(pid).unwrap_or_default(),
        }
    }
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, before: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(before.cpu),
            switches: self.switches.saturating_sub(before.switches),
            child_cpu: self.child_cpu.saturating_sub(before.child_cpu),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.cpu += other.cpu;
        self.switches += other.switches;
        self.child_cpu += other.child_cpu;
    }
}

/// The first line of `/proc/loadavg` (1, 5 and 15 minute averages).
pub fn loadavg() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn mem_total() -> Option<String> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = s
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(format!("{:.1} GiB", kib as f64 / 1024.0 / 1024.0))
}

fn first_line(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.lines().next().unwrap_or("").trim().to_owned())
}

/// The Markdown header describing the machine and its state at the start of the run.
pub fn machine_header() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let unknown = || "?".to_owned();
    let mut out = String::from("# corral-bench\n\n");
    out += &format!(
        "- date: {}\n",
        humantime::format_rfc3339_seconds(SystemTime::now())
    );
    out += &format!("- CPU: {} × {nproc}\n", cpu_model().unwrap_or_else(unknown));
    out += &format!("- memory: {}\n", mem_total().unwrap_or_else(unknown));
    out += &format!(
        "- kernel: {}\n",
        first_line("/proc/sys/kernel/osrelease").unwrap_or_else(unknown)
    );
    if let Some(gov) = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") {
        out += &format!("- cpufreq governor: {gov}\n");
    }
    out += &format!(
        "- load average at start (1/5/15 min): {}\n",
        loadavg().unwrap_or_else(unknown)
    );
    out
}

/// Latency distribution of a set of calls.
pub struct Stats {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub mean: Duration,
}

impl Stats {
    /// Nearest-rank percentiles of `samples` (nanoseconds).
    pub fn of(mut samples: Vec<u64>) -> Stats {
        assert!(!samples.is_empty(), "no samples");
        samples.sort_unstable();
        let n = samples.len();
        let rank = |q: f64| {
            let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            Duration::from_nanos(samples[idx])
        };
        let sum: u128 = samples.iter().map(|&s| s as u128).sum();
        Stats {
            count: n,
            p50: rank(0.50),
            p99: rank(0.99),
            p999: rank(0.999),
            mean: Duration::from_nanos((sum / n as u128) as u64),
        }
    }
}

/// Microseconds with one decimal.
pub fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Milliseconds with one decimal.
pub fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// A whole number with thousands separators.
pub fn thousands(n: f64) -> String {
    let s = format!("{:.0}", n);
    let (sign, digits) = s.split_at(if s.starts_with('-') { 1 } else { 0 });
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// Median of a small set of durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Total size of the files directly in `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A set of CPUs ([`pin_to_one_cpu`]); the benchmark pins only on Linux, whose figures
/// BENCHMARKS.md reports.
#[cfg(target_os = "linux")]
pub type CpuMask = libc::cpu_set_t;
#[cfg(not(target_os = "linux"))]
pub type CpuMask = ();

/// Pins this thread and every thread of `pids` and of their descendants to the CPU this
/// thread is on; returns the mask to restore, `None` if nothing was pinned. Left to the
/// scheduler, a sequential ping-pong on this 2-vCPU VM settles either on one vCPU (the
/// fast regime) or across both, where every hand-off wakes a halted vCPU (≈ 70–80 µs more
/// per call, and the wake-ups show up as CPU of the client and the gateway). Which one a
/// path lands in depends on what ran before, not on the path: the bridge shares the
/// daemon with HTTP and mostly landed split while stdio landed on one vCPU, which made
/// the bridge look 4–5× slower than stdio.
#[cfg(target_os = "linux")]
pub fn pin_to_one_cpu(pids: &[u32]) -> Option<CpuMask> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills the one we
    // own, sched_getcpu has no preconditions, and CPU_SET gets a CPU the kernel named.
    let (old, one) = unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&old), &mut old) != 0 {
            return None;
        }
        let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        (old, one)
    };
    set_affinity(pids, &one);
    Some(old)
}

/// Sets the CPUs of this thread and of every thread of `pids` and of their descendants.
#[cfg(target_os = "linux")]
pub fn set_affinity(pids: &[u32], set: &CpuMask) {
    let mut procs = pids.to_vec();
    for &p in pids {
        procs.extend(descendants_of(p).into_iter().map(|(pid, _)| pid));
    }
    let tids = procs.into_iter().flat_map(task_ids);
    for tid in std::iter::once(0).chain(tids) {
        // SAFETY: `set` is a valid cpu_set_t of the size given.
        let r =
            unsafe { libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of_val(set), set) };
        if r != 0 {
            eprintln!(
                "corral-bench: cannot set the CPU affinity of thread {tid}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Elsewhere nothing is pinned.
#[cfg(not(target_os = "linux"))]
pub fn pin_to_one_cpu(_pids: &[u32]) -> Option<CpuMask> {
    None
}

/// Elsewhere nothing is pinned.
#[cfg(not(target_os = "linux"))]
pub fn set_affinity(_pids: &[u32], _set: &CpuMask) {}

/// Which of two paths goes first in block or round `n`: they take turns, so drift in the
/// machine's state hits both alike.
pub fn alternate(n: usize) -> [usize; 2] {
    if n.is_multiple_of(2) { [0, 1] } else { [1, 0] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = Stats::of((1..=1000).rev().collect());
        assert_eq!(s.p50, Duration::from_nanos(500));
        assert_eq!(s.p99, Duration::from_nanos(990));
        assert_eq!(s.p999, Duration::from_nanos(999));
        assert_eq!(s.mean, Duration::from_nanos(500));
        assert_eq!(s.count, 1000);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(12345.0), "12,345");
        assert_eq!(thousands(1234567.0), "1,234,567");
    }

    #[test]
    fn own_cpu_is_readable_from_proc() {
        let pid = std::process::id();
        assert!(proc_cpu(pid).is_some());
        assert!(proc_stat_cpu(pid).is_some());
    }

    #[test]
    fn status_fields_and_children_are_readable_from_proc() {
        let pid = std::process::id();
        assert!(proc_status_field(pid, "VmRSS").is_some_and(|k| k > 0));
        assert!(proc_status_field(pid, "Threads").is_some_and(|n| n >= 1));
        assert!(proc_status_field(pid, "VmRS").is_none());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let kids = children_of(pid);
        let desc = descendants_of(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(kids.contains(&(child.id(), "sleep".to_owned())), "{kids:?}");
        assert!(desc.contains(&(child.id(), "sleep".to_owned())), "{desc:?}");
        assert!(proc_children_cpu(pid).is_some());
        assert!(task_ids(pid).contains(&pid));
    }
}

//! Alert scanner throughput on a realistic mixed log, and the prefilter choices.
//!
//!     cargo bench -p corral-alerts --bench scan
//!
//! The log is generated deterministically: 97% ordinary lines of varied shapes (HTTP
//! access logs, INFO/DEBUG lines, JSON logs, vite/webpack progress with ANSI colours),
//! 3% error lines, part of them multi-line (Python tracebacks, Node stacks, Rust
//! diagnostics). Each measurement is the best of 5 runs over the whole log on one
//! thread. `CORRAL_BENCH_LINES` sets the log's length (default 1,000,000).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aho_corasick::AhoCorasick;
use corral_alerts::{AlertRules, Scanner, Stream};
use regex::RegexSet;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PATHS: &[&str] = &[
    "/api/users",
    "/api/orders/1234",
    "/static/app.3f9a1c.js",
    "/health",
    "/api/search?q=shoes&page=2",
    "/favicon.ico",
];
const MODULES: &[&str] = &["http", "db::pool", "auth", "worker", "cache", "scheduler"];

fn ordinary(rng: &mut Rng, i: usize) -> String {
    let ms = rng.below(900);
    match rng.below(10) {
        0..=2 => format!(
            r#"127.0.0.1 - - [10/Oct/2024:13:{:02}:{:02} +0000] "GET {} HTTP/1.1" {} {} "-" "Mozilla/5.0 (X11; Linux x86_64)""#,
            i % 60,
            ms % 60,
            PATHS[rng.below(6) as usize],
            [200, 200, 304, 404][rng.below(4) as usize],
            rng.below(50_000)
        ),
        3..=4 => format!(
            "2024-10-10T13:55:{:02}.{ms:03}Z INFO  {}: request completed status=200 duration_ms={} user_id={}",
            i % 60,
            MODULES[rng.below(6) as usize],
            rng.below(300),
            rng.below(100_000)
        ),
        5 => format!(
            "2024-10-10 13:55:{:02},{ms:03} DEBUG [{}] cache hit key=session:{:x} ttl=3600",
            i % 60,
            MODULES[rng.below(6) as usize],
            rng.next()
        ),
        6 => format!(
            r#"{{"level":"info","time":{},"pid":4242,"hostname":"dev","reqId":"req-{}","msg":"request completed","responseTime":{}}}"#,
            1_700_000_000_000u64 + i as u64,
            rng.below(10_000),
            rng.below(200)
        ),
        7 => format!(
            "\x1b[2m1:55:{:02} PM\x1b[22m \x1b[36m\x1b[1m[vite]\x1b[22m\x1b[39m \x1b[32mhmr update \x1b[39m\x1b[2m/src/components/Card{}.tsx\x1b[22m",
            i % 60,
            rng.below(40)
        ),
        8 => format!(
            "<s> [webpack.Progress] {}% building {}/{} entries {}/{} dependencies {}/{} modules",
            rng.below(100),
            rng.below(3),
            3,
            rng.below(900),
            900,
            rng.below(700),
            700
        ),
        _ => format!(
            "    compiled {} modules in {ms} ms; watching for file changes…",
            rng.below(2000)
        ),
    }
}

fn error(rng: &mut Rng, out: &mut Vec<String>) {
    match rng.below(8) {
        0 => out.extend(
            [
                "Traceback (most recent call last):",
                r#"  File "/app/server.py", line 88, in handle"#,
                "    return view(request)",
                r#"  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads"#,
                "    return _default_decoder.decode(s)",
                "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
            ]
            .map(String::from),
        ),
        1 => out.extend(
            [
                "TypeError: Cannot read properties of undefined (reading 'id')",
                "    at render (/app/src/routes/user.js:14:22)",
                "    at Layer.handle (/app/node_modules/express/lib/router/layer.js:95:5)",
                "    at next (/app/node_modules/express/lib/router/route.js:149:13)",
            ]
            .map(String::from),
        ),
        2 => out.extend(
            [
                "error[E0308]: mismatched types",
                " --> src/main.rs:3:18",
                "  |",
                "",
            ]
            .map(String::from),
        ),
        3 => out.push(format!(
            "2024-10-10 13:55:01 ERROR db::pool: connection {} lost, retrying",
            rng.below(10)
        )),
        4 => out.push(
            "src/app.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'."
                .into(),
        ),
        5 => out.push("Error: connect ECONNREFUSED 127.0.0.1:5432".into()),
        6 => out.push("/app/legacy.py:3: DeprecationWarning: the imp module is deprecated".into()),
        _ => out.push(
            r#"{"level":"error","time":1700000000000,"msg":"payment provider timeout"}"#.into(),
        ),
    }
}

fn corpus(lines: usize) -> Vec<String> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(lines + 8);
    let mut errors = 0;
    while out.len() < lines {
        if rng.below(100) < 1 {
            // Error events are ~1% of events but, with their stacks, ~3% of lines.
            let before = out.len();
            error(&mut rng, &mut out);
            errors += out.len() - before;
        } else {
            let i = out.len();
            out.push(ordinary(&mut rng, i));
        }
    }
    eprintln!(
        "corpus: {} lines, {:.1} MB, {:.1}% error lines",
        out.len(),
        out.iter().map(|l| l.len() + 1).sum::<usize>() as f64 / 1e6,
        errors as f64 * 100.0 / out.len() as f64
    );
    out
}

/// Best of 5: (lines/s, MB/s).
fn measure(name: &str, lines: &[String], mut run: impl FnMut(&[String]) -> usize) {
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let mut best = Duration::MAX;
    let mut hits = 0;
    for _ in 0..5 {
        let start = Instant::now();
        hits = black_box(run(lines));
        best = best.min(start.elapsed());
    }
    let secs = best.as_secs_f64();
    println!(
        "{name:<44} {:>7.2} M lines/s {:>7.0} MB/s  ({hits} hits)",
        lines.len() as f64 / secs / 1e6,
        bytes as f64 / secs / 1e6
    );
}

fn main() {
    let n = std::env::var("CORRAL_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let lines = corpus(n);
    let rules = Arc::new(AlertRules::defaults());
    let literals = rules.literals().to_vec();
    println!(
        "{} prefilter literals, {} built-in regexes",
        literals.len(),
        rules.builtin_regexes().len()
    );

    // ---- the prefilter alone: does the line contain any literal? ----
    measure("prefilter: naive str::contains loop", &lines, |ls| {
        ls.iter()
            .filter(|l| literals.iter().any(|lit| l.contains(lit)))
            .count()
    });
    let ac = AhoCorasick::new(&literals).unwrap();
    measure("prefilter: aho-corasick is_match", &lines, |ls| {
        ls.iter().filter(|l| ac.is_match(l.as_str())).count()
    });
    let ac_dfa = AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(&literals)
        .unwrap();
    measure("prefilter: aho-corasick is_match, DFA", &lines, |ls| {
        ls.iter().filter(|l| ac_dfa.is_match(l.as_str())).count()
    });
    let ac_leftmost = AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .build(&literals)
        .unwrap();
    measure("prefilter: aho-corasick is_match, leftmost", &lines, |ls| {
        ls.iter()
            .filter(|l| ac_leftmost.is_match(l.as_str()))
            .count()
    });
    let teddy = aho_corasick::packed::Config::new()
        .heuristic_pattern_limits(false)
        .builder()
        .extend(&literals)
        .build()
        .expect("Teddy on this CPU");
    // What the scanner uses: AhoCorasick above only uses Teddy up to 64 patterns.
    measure("prefilter: packed Teddy, no pattern limit", &lines, |ls| {
        ls.iter()
            .filter(|l| teddy.find(l.as_str()).is_some())
            .count()
    });
    let escaped: Vec<String> = literals.iter().map(|l| regex::escape(l)).collect();
    let lit_set = RegexSet::new(&escaped).unwrap();
    measure("prefilter: RegexSet of the literals", &lines, |ls| {
        ls.iter().filter(|l| lit_set.is_match(l)).count()
    });
    let rule_set = RegexSet::new(rules.builtin_regexes()).unwrap();
    measure("no prefilter: RegexSet of the rule regexes", &lines, |ls| {
        ls.iter().filter(|l| rule_set.is_match(l)).count()
    });

    // ---- the whole scanner: clean, prefilter, rules, groups ----
    let now = SystemTime::now();
    measure("Scanner::feed (everything)", &lines, |ls| {
        let mut scanner = Scanner::new(Arc::clone(&rules), "process:web");
        let mut out = Vec::new();
        for l in ls {
            scanner.feed(l, Stream::Stdout, now, &mut out);
        }
        scanner.finish(&mut out);
        out.len()
    });
    let plain: Vec<String> = lines
        .iter()
        .map(|l| corral_alerts::clean(l).into_owned())
        .collect();
    measure("Scanner::feed (lines without ANSI)", &plain, |ls| {
        let mut scanner = Scanner::new(Arc::clone(&rules), "process:web");
        let mut out = Vec::new();
        for l in ls {
            scanner.feed(l, Stream::Stdout, now, &mut out);
        }
        scanner.finish(&mut out);
        out.len()
    });
}

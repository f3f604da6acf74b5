//! What the alert tests share.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use corral_alerts::{Alert, AlertRules};

/// The built-in rules, built once per test binary.
pub fn rules() -> Arc<AlertRules> {
    static RULES: OnceLock<Arc<AlertRules>> = OnceLock::new();
    Arc::clone(RULES.get_or_init(|| Arc::new(AlertRules::defaults())))
}

/// What an alert says beyond message and location, a line per field: `function: …`,
/// `code: …`, `cause: …`, then `frame: …` for each of its frames.
pub fn context(a: &Alert) -> Vec<String> {
    let fields = [
        ("function", &a.function),
        ("code", &a.code),
        ("cause", &a.cause),
    ];
    let mut lines: Vec<String> = fields
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}: {v}")))
        .collect();
    lines.extend(a.frames.iter().map(|f| format!("frame: {f}")));
    lines
}

/// A port the OS gave this test process (bound on 127.0.0.1:0 and read back), for the
/// lines the tests print: no number another program (another project's Corral) may
/// hold is written into a test.
pub fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port()
    })
}

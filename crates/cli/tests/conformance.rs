//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, active server
//! scenarios) against `corral up` fronting `corral-fixture --conformance` with bare tool
//! names. Expected failures: tests/conformance/expected-failures.yml (empty).

mod common;
use common::http::Up;
use common::*;

#[test]
fn official_conformance_suite_passes() {
    let suite = peers().join("conformance/node_modules");
    let bin = suite.join(".bin");
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"
auth = "none"          # the suite cannot send a bearer token
tool_prefix = "never"  # the scenarios call tools by their bare names

[servers.conformance]
command = "{fixture}"
args = ["--conformance"]
quiet = true
"#,
    );
    // auth = "none" is the user's decision: this project is trusted to widen access.
    p.trust_widening();
    let up = Up::start(&p);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new(bin.join("conformance"))
        .args(["server", "--url", &up.url, "--expected-failures"])
        .arg(repo().join("tests/conformance/expected-failures.yml"))
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.rsplit("=== SUMMARY ===").next().unwrap_or(&stdout);
    assert!(
        out.status.success(),
        "conformance failures:\n{summary}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(summary.contains("Baseline check passed"), "{summary}");
    assert!(
        summary.contains("Total: ") && summary.contains(" passed, 0 failed"),
        "{summary}"
    );
    assert!(
        !summary.contains(": 0 passed"),
        "a scenario ran no check: {summary}"
    );
}

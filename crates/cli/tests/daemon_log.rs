//! `.corral/daemon.log` holds the detached daemon's own lines only, and is rotated like
//! every other log: a flooding server cannot grow it without limit.

mod common;
use common::*;

const CFG: &str = r#"
[servers.fx]
command = "{fixture}"
args = ["--banner", "fixture banner line"]
"#;

#[test]
fn daemon_log_is_not_a_copy_of_every_servers_stderr_and_is_rotated() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    // What an earlier daemon left: over the rotation size.
    std::fs::create_dir_all(p.dir.join(".corral")).unwrap();
    let old = vec![b'x'; 11 << 20];
    std::fs::write(p.dir.join(".corral/daemon.log"), &old).unwrap();

    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let server_log = p.dir.join(".corral/logs/fx.log");
    wait_until("the server's banner is in its own log", || {
        std::fs::read_to_string(&server_log).is_ok_and(|l| l.contains("fixture banner line"))
    });
    let rotated = p.dir.join(".corral/daemon.log.1");
    wait_until("the old daemon.log is rotated at start", || {
        std::fs::metadata(&rotated).is_ok_and(|m| m.len() == old.len() as u64)
    });
    let log = std::fs::read_to_string(p.dir.join(".corral/daemon.log")).unwrap();
    assert!(
        log.len() < 64 * 1024,
        "a fresh daemon.log: {} bytes",
        log.len()
    );
    assert!(
        !log.contains("fixture banner line"),
        "a server's stderr is not copied into daemon.log:\n{log}"
    );
}

//! A daemon that cannot contain its children says so, for as long as it runs: the
//! guard's failure is an event and a warning in its status, never dropped.

use corral_daemon::{DaemonInfo, DaemonOptions, Request};
use std::sync::{Arc, Mutex};

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_guard_that_cannot_start_is_an_event_and_a_status_warning() {
    let dir = std::env::temp_dir().join(format!("corral-containment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corral.toml");
    std::fs::write(&path, "[gateway]\nauth = \"none\"\n").unwrap();
    let config = corral_config::load(&path).unwrap();
    let paths = corral_daemon::Paths::new(&config.path, &config.state_dir);

    let info: Arc<Mutex<Option<DaemonInfo>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let opts = DaemonOptions {
        guard_exe: Some("/nonexistent/corral".into()),
        // auth = "none" applies (and no user config is read).
        allow_widened_access: true,
        ..DaemonOptions::default()
    };
    let seen = info.clone();
    // The daemon's future is not Send: it runs beside the checks, in this task.
    let daemon = corral_daemon::run(
        config,
        opts,
        move |i| *seen.lock().unwrap() = Some(i.clone()),
        async {
            let _ = stop_rx.await;
        },
    );
    let checks = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Ok(reply) = corral_daemon::client::request(&paths, &Request::Status).await {
                break reply.data;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never answered"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        let warnings = status["warnings"].as_array().expect("warnings in status");
        assert!(
            warnings.iter().any(|w| w
                .as_str()
                .unwrap()
                .contains("cannot start the guard process")),
            "{status}"
        );
        let announced = info.lock().unwrap().clone().expect("ready was called");
        assert_eq!(announced.warnings.len(), warnings.len());

        let _ = stop_tx.send(());
    };
    let (ran, ()) = tokio::join!(daemon, checks);
    ran.unwrap();
    let journal = std::fs::read_to_string(paths.journal).unwrap();
    assert!(
        journal.contains("\"daemon.containment_failed\"")
            && journal.contains("cannot start the guard process"),
        "{journal}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! `corral events [-f] [-n N] [--json]`: the daemon's event journal (and live events);
//! `--standalone -f` runs the servers in-process and shows their events until Ctrl-C.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use corral_events::{Event, EventBus, Kind};
use std::path::Path;
use tokio::io::AsyncBufReadExt;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(
    config: Option<&Path>,
    follow: bool,
    json: bool,
    lines: usize,
    standalone: bool,
) -> CmdResult {
    let cfg = project::load(config)?;
    let style = output::Style::stdout();
    let show = |ev: Event| {
        if json {
            println!("{}", ev.to_json_line());
        } else {
            println!("{}", output::render_event(&ev, style));
        }
    };
    if !standalone {
        let p = project::paths(&cfg);
        let stream = match corral_daemon::client::open(&p, &Request::Events { lines, follow }).await
        {
            Ok(s) => s,
            Err(_) if !follow => {
                // No daemon: the journal of the last one is still on disk.
                for ev in corral_daemon::journal::tail(&p.journal, lines) {
                    show(ev);
                }
                return Ok(());
            }
            Err(e) => {
                return Err(Failure::Op(format!(
                    "{e}; or use `corral events --standalone -f` to run the servers here"
                )));
            }
        };
        let mut reader = tokio::io::BufReader::new(stream).lines();
        // Following, the daemon ends the stream after its last event, `daemon.stopped`.
        let work = async {
            let mut stopped = false;
            while let Ok(Some(line)) = reader.next_line().await {
                if let Ok(ev) = serde_json::from_str::<Event>(&line) {
                    stopped = ev.is(Kind::DaemonStopped);
                    show(ev);
                }
            }
            if follow && !stopped {
                return Err(Failure::Op(format!(
                    "the daemon went away without stopping (killed?); its last events are in {}",
                    p.journal.display()
                )));
            }
            Ok(())
        };
        return tokio::select! {
            r = work => r,
            _ = project::interrupted() => Ok(()),
        };
    }
    if !follow {
        return Err(Failure::Usage(
            "`--standalone` needs `-f`: it runs the servers until Ctrl-C".into(),
        ));
    }
    let servers = project::select(&cfg, None)?;
    let bus = EventBus::default();
    let mut rx = bus.subscribe();
    let console = Some(corral_supervisor::Console::stderr());
    let run = Standalone::start(&cfg, servers, bus, console);
    // On Ctrl-C / SIGTERM the servers are stopped while events keep printing, so the
    // stream ends with their `server.stopped` events.
    let stop = async {
        project::interrupted().await;
        run.stop().await;
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(ev) => show(ev),
                Err(RecvError::Lagged(n)) => eprintln!("corral: {n} events dropped (output too slow)"),
                Err(RecvError::Closed) => break,
            },
            _ = &mut stop => break,
        }
    }
    while let Ok(ev) = rx.try_recv() {
        show(ev);
    }
    Ok(())
}

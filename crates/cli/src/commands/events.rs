//! `corral events`: the event stream. Without a daemon (issue 3) only `--standalone -f`
//! is available: it runs the servers in-process and prints their events until Ctrl-C.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_events::EventBus;
use std::path::Path;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(config: Option<&Path>, follow: bool, json: bool, standalone: bool) -> CmdResult {
    if !standalone || !follow {
        return Err(Failure::Usage(
            "this version of corral has no daemon yet: use `corral events --standalone -f` to run the servers and watch their events".into(),
        ));
    }
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, None)?;
    let bus = EventBus::default();
    let mut rx = bus.subscribe();
    let console = Some(corral_supervisor::Console::stderr());
    let run = Standalone::start(&cfg, servers, bus, console);
    let color = output::color_stdout();
    let show = |ev: corral_events::Event| {
        if json {
            println!("{}", ev.to_json_line());
        } else {
            println!("{}", output::render_event(&ev, color));
        }
    };
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

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
    let run = Standalone::start(&cfg, servers, bus);
    let color = output::color_stdout();
    let print = async {
        loop {
            match rx.recv().await {
                Ok(ev) if json => println!("{}", ev.to_json_line()),
                Ok(ev) => println!("{}", output::render_event(&ev, color)),
                Err(RecvError::Lagged(n)) => {
                    eprintln!("corral: {n} events dropped (output too slow)")
                }
                Err(RecvError::Closed) => break,
            }
        }
    };
    tokio::select! {
        _ = print => {}
        _ = project::interrupted() => {}
    }
    run.stop().await;
    Ok(())
}

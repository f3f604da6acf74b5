//! `corral dashboard`: the daemon's dashboard, opened in the browser with a one-time
//! login link.

use crate::{CmdResult, project};
use corral_daemon::protocol::Request;
use std::path::Path;

pub async fn run(config: Option<&Path>, no_browser: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let answer = project::daemon_request(&cfg, &Request::Dashboard).await?;
    let url = answer["url"].as_str().unwrap_or_default();
    // The browser gets the launch page's path, which only this user can read; the link
    // itself would be in its arguments, which every user can.
    let opened = !no_browser
        && answer["launch"]
            .as_str()
            .is_some_and(corral_remote::oauth::flow::open_browser);
    if opened {
        println!("opened the dashboard in the browser (the link signs in once, within 5 minutes)");
    } else {
        println!("open the dashboard (this link signs in once, within 5 minutes):\n{url}");
    }
    Ok(())
}

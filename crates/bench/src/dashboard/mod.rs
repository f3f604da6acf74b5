//! `corral-bench dashboard`: the dashboard in real headless Chromium (Debian's
//! `chromium`), driven over the DevTools protocol with the dev proxy's end-to-end
//! harness (`crates/proxy/tests/e2e`: [`chromium`], [`cdp`], [`proc`]).
//!
//! - [`bench`]: time to the first overview row and first contentful paint over cold
//!   loads, the bytes a first visit transfers, and the daemon's CPU while an open logs
//!   view follows a unit printing 1000 lines/s, against the same with no dashboard.
//! - [`shots`]: screenshots of every view of a running project
//!   (`scripts/dashboard-screenshots.sh`).

mod bench;
mod daemon;
mod shots;

#[allow(dead_code)]
#[path = "../../../proxy/tests/e2e/cdp.rs"]
mod cdp;
#[allow(dead_code)]
#[path = "../../../proxy/tests/e2e/chromium.rs"]
mod chromium;
#[allow(dead_code)]
#[path = "../../../proxy/tests/e2e/proc.rs"]
mod proc;

pub use bench::{BenchOpts, PRINTER_COMMAND, printer_main, run};
pub use shots::{ShotOpts, screenshots};

use cdp::Page;
use serde_json::{Value, json};
use std::time::Duration;

/// How long any one thing may take: a browser start, a page load, a view's content.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The message the harness panics with when Chromium is missing.
pub fn not_installed(what: &str) -> String {
    format!("{what} is not installed: `apt-get install chromium` (the dashboard bench drives it)")
}

/// The dashboard's size on the screen (screenshots, and the bench's loads).
pub const VIEWPORT: (u32, u32) = (1400, 900);

/// Gives `page` the bench's viewport and brings it to the front (a background tab gets
/// no animation frames).
async fn prepare(page: &Page) -> Result<(), String> {
    page.call("Page.bringToFront", json!({})).await?;
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": VIEWPORT.0, "height": VIEWPORT.1, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await
    .map(drop)
}

/// Signs in with a one-time link and waits until the app's live feed is open.
async fn login(page: &Page, url: &str) -> Result<(), String> {
    page.navigate(url, DEADLINE).await?;
    page.wait_until(
        "location.pathname === '/dashboard/' && document.body.dataset.stream === 'open'",
        &json!(true),
        DEADLINE,
    )
    .await
    .map_err(|e| format!("signing in to the dashboard: {e}"))
}

/// Waits for two animation frames: what the page changed is painted.
async fn painted(page: &Page) -> Result<(), String> {
    page.evaluate(
        "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))",
    )
    .await
    .map(drop)
}

/// The number of elements `selector` matches in the page.
async fn count(page: &Page, selector: &str) -> Result<u64, String> {
    let v = page
        .evaluate(&format!(
            "document.querySelectorAll({}).length",
            Value::from(selector)
        ))
        .await?;
    Ok(v.as_u64().unwrap_or(0))
}

/// Waits until `selector` matches at least `n` elements.
async fn wait_count(page: &Page, selector: &str, n: u64) -> Result<(), String> {
    page.wait_until(
        &format!(
            "document.querySelectorAll({}).length >= {n}",
            Value::from(selector)
        ),
        &json!(true),
        DEADLINE,
    )
    .await
}

/// Closes a tab.
async fn close(page: Page) -> Result<(), String> {
    page.cdp
        .call(
            None,
            "Target.closeTarget",
            json!({"targetId": page.target_id}),
        )
        .await
        .map(drop)
}

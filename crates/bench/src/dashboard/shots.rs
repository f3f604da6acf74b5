//! Screenshots of every view of a running project's dashboard, at [`super::VIEWPORT`]:
//! every proxy's page is opened first (so its errors reach the errors and traffic
//! views), the errors view waited on until it lists `--min-incidents`, then each view is
//! shown once its content is in, in light mode, and the overview and the logs again in
//! dark mode.

use super::cdp::Page;
use super::chromium::Chromium;
use super::daemon::Daemon;
use super::{DEADLINE, login, painted, prepare, wait_count};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct ShotOpts {
    /// The project's config; its daemon must be running.
    pub config: PathBuf,
    /// Where the PNGs go.
    pub out: PathBuf,
    /// Incidents the errors view must show before any view is taken.
    pub min_incidents: u64,
    /// The unit whose log is shown (default: the first process, else server).
    pub logs: Option<String>,
}

/// One view: its name (the file's), the hash that shows it, what must be in it.
struct View {
    file: &'static str,
    hash: String,
    ready: &'static str,
    min: u64,
}

/// Takes the screenshots; a list of the files written.
pub fn screenshots(corral: &Path, opts: &ShotOpts) -> Result<String, String> {
    let daemon = Daemon::running(corral, &opts.config)?;
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let rt = crate::util::runtime();
    rt.block_on(async {
        let chromium = Chromium::launch().await;
        let result = shoot(&chromium, &daemon, opts).await;
        let tail = chromium.stderr_tail();
        chromium.close().await;
        result.map_err(|e| format!("{e}\n{tail}"))
    })
}

async fn shoot(chromium: &Chromium, daemon: &Daemon, opts: &ShotOpts) -> Result<String, String> {
    let ps = daemon.ps()?;
    let names = |kind: &str| -> Vec<String> {
        ps[kind]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (servers, processes, proxies) = (names("servers"), names("processes"), names("proxies"));
    // The apps behind the proxies, opened once so that their pages run.
    for p in ps["proxies"].as_array().into_iter().flatten() {
        if let Some(url) = p["url"].as_str() {
            let page = chromium.page().await;
            page.navigate(url, DEADLINE).await?;
        }
    }
    let page = chromium.page().await;
    prepare(&page).await?;
    login(&page, &daemon.login_url()?).await?;

    let enc = |s: &str| {
        s.replace('%', "%25")
            .replace('/', "%2F")
            .replace(' ', "%20")
    };
    let first_tool = {
        let tools = daemon.corral(&["tools", "--json"])?;
        let v: Value = serde_json::from_str(&tools).map_err(|e| format!("tools --json: {e}"))?;
        let list = v["tools"]
            .as_array()
            .or(v.as_array())
            .cloned()
            .unwrap_or_default();
        list.iter()
            .filter_map(|t| t["name"].as_str())
            .find(|n| !n.starts_with("corral__"))
            .map(str::to_owned)
    };
    let units = servers.len() + processes.len() + proxies.len();
    let mut views = vec![
        View {
            file: "overview",
            hash: "#overview".into(),
            ready: "#view-overview tr[data-name]",
            min: units as u64,
        },
        View {
            file: "errors",
            hash: "#errors".into(),
            ready: "#view-errors .incident",
            min: opts.min_incidents,
        },
    ];
    if let Some(unit) = opts.logs.as_ref().or(processes.first()).or(servers.first()) {
        views.push(View {
            file: "logs",
            hash: format!("#logs/{}", enc(unit)),
            ready: "#log-lines .log-line",
            min: 5,
        });
    }
    if let Some(proxy) = proxies.first() {
        views.push(View {
            file: "traffic",
            hash: format!("#traffic/{}", enc(proxy)),
            ready: "#view-traffic .traffic-row",
            min: 2,
        });
    }
    views.push(View {
        file: "tools",
        hash: first_tool.map_or("#tools".into(), |t| format!("#tools/{}", enc(&t))),
        ready: "#view-tools .tool",
        min: 1,
    });
    views.push(View {
        file: "events",
        hash: "#events".into(),
        ready: "#view-events .event-row",
        min: 3,
    });

    // Everything the project's pages and processes report is in before the first view.
    page.evaluate("location.hash = '#errors'").await?;
    wait_count(&page, "#view-errors .incident", opts.min_incidents)
        .await
        .map_err(|e| format!("the errors view: {e}"))?;
    let mut written = Vec::new();
    for view in &views {
        written.push(take(&page, view, "", &opts.out).await?);
    }
    page.call(
        "Emulation.setEmulatedMedia",
        json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    )
    .await?;
    for view in views
        .iter()
        .filter(|v| v.file == "overview" || v.file == "logs")
    {
        written.push(take(&page, view, "-dark", &opts.out).await?);
    }
    Ok(written.join("\n"))
}

/// Shows `view`, waits for its content, and writes its screenshot as
/// `OUT/FILE{suffix}.png`; the file's name and size.
async fn take(page: &Page, view: &View, suffix: &str, out: &Path) -> Result<String, String> {
    page.evaluate(&format!(
        "location.hash = {}",
        Value::from(view.hash.as_str())
    ))
    .await?;
    page.wait_until(
        &format!("!document.querySelector('#view-{}').hidden", view.file),
        &json!(true),
        DEADLINE,
    )
    .await?;
    wait_count(page, view.ready, view.min)
        .await
        .map_err(|e| format!("the {} view: {e}", view.file))?;
    painted(page).await?;
    let shot = page
        .call("Page.captureScreenshot", json!({"format": "png"}))
        .await?;
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap_or(""))
        .map_err(|e| format!("the screenshot is not base64: {e}"))?;
    let file = out.join(format!("{}{suffix}.png", view.file));
    std::fs::write(&file, &png).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(format!("{} ({} KB)", file.display(), png.len() / 1024))
}

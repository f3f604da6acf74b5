//! What the caller gathers: observations and what it knows about each source.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// How bad it is (`Warning < Error`): the alert scanner's severity, so an alert's
/// carries over as it is.
pub use corral_alerts::Severity;

/// The HTTP request an observation is about (a proxied request, a browser `fetch`).
/// Typed, because the noise filter decides on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Http {
    pub method: String,
    /// As requested: path and query (`/api/users?page=2`); the noise rules look at the
    /// path without the query.
    pub path: String,
    /// `None` when no response came (connection refused, reset, timeout).
    pub status: Option<u16>,
    /// Another site's page sent it (not a navigation): anyone's page can make such a
    /// request, path and all, so it is not the app's traffic and is hidden as noise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_site: bool,
}

impl Http {
    pub fn new(method: impl Into<String>, path: impl Into<String>, status: Option<u16>) -> Self {
        Http {
            method: method.into(),
            path: path.into(),
            status,
            cross_site: false,
        }
    }

    /// Marks it as sent by another site's page (see [`Http::cross_site`]).
    pub fn cross_site(mut self, cross_site: bool) -> Self {
        self.cross_site = cross_site;
        self
    }

    /// The path without `?query` and `#fragment`.
    pub fn bare_path(&self) -> &str {
        let end = self.path.find(['?', '#']).unwrap_or(self.path.len());
        &self.path[..end]
    }
}

/// Who wrote an observation's text. Only Corral's own sentences are Corral's: a server's
/// stderr, a process's output, a request's path, a dev server's error page and a web
/// page's error report say whatever their authors (or an attacker who reached them)
/// made them say. The report marks such text, so an agent reads it as data to diagnose,
/// never as instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextFrom {
    /// Corral's own words (an exit status, a state).
    Corral,
    /// A server's stderr or a dev process's output.
    Output,
    /// A request through the dev proxy (its path) and the dev server's response (its
    /// error message).
    Http,
    /// A web page's error report.
    Page,
}

impl TextFrom {
    /// How the text view says where the text came from; `None` for Corral's own.
    pub fn label(self) -> Option<&'static str> {
        match self {
            TextFrom::Corral => None,
            TextFrom::Output => Some("text from its output"),
            TextFrom::Http => Some("text from HTTP"),
            TextFrom::Page => Some("text from the page"),
        }
    }
}

/// One thing that went wrong, as the caller recorded it: an alert, a crash, a process
/// exit, a browser error, a failed request. The caller may already have folded
/// repeats into one (`count`, `first_seen`, `last_seen`); [`report`](crate::report)
/// folds further.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// `server:NAME`, `process:NAME`, `proxy:NAME` or `browser`.
    pub source: String,
    /// A short kind, shown in brackets after the source: `crash`, `start_failed`,
    /// `exit`, an alert rule (`python.traceback`), `js`, `console`, `rejection`,
    /// `fetch`, `http`, `transport`.
    pub category: String,
    pub severity: Severity,
    /// The decisive line, chosen by the caller (`ValueError: …`, `GET /api → 500`).
    pub message: String,
    /// Where to look: `src/components/UserList.tsx:28:12`, `app.py:12`.
    pub location: Option<String>,
    /// Extra `name: value` lines shown after the location, in order: `("page", URL)`.
    pub context: Vec<(String, String)>,
    /// Who wrote `message`, `location` and `context` (see [`TextFrom`]).
    pub text_from: TextFrom,
    /// Set when the observation is about an HTTP request; the noise filter only
    /// applies its built-in rules to these.
    pub http: Option<Http>,
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    /// Occurrences already folded into this observation (0 is taken as 1).
    pub count: u64,
    /// Every field of the original record, for `raw` output.
    pub raw: serde_json::Value,
    /// The request through the dev proxy this is (a failed request) or reports (a
    /// page's failed fetch): what joins it to the rest of the same failure.
    pub exchange: Option<Exchange>,
    /// The page it happened on (a browser error's page URL).
    pub page: Option<String>,
    /// The dev process or server behind it when that is not its source (the process
    /// serving a proxy's target, `process:api`): its restarts and reloads fix it too.
    pub unit: Option<String>,
    /// What the stack says beyond the location: function, source line, root cause.
    pub detail: Detail,
}

/// The decisive context of an error with a stack (see `corral_alerts::Alert`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    /// The function of the frame at the location.
    pub function: Option<String>,
    /// That frame's source line.
    pub code: Option<String>,
    /// A chained exception's root cause, when it is not the message.
    pub cause: Option<String>,
    /// The reduced stack: frames in the user's code, innermost first.
    pub frames: Vec<String>,
}

/// A request through the dev proxy as an observation knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The proxy's id for it (it sends it upstream as `X-Request-Id`, a page echoes it
    /// in the report of a failed fetch); `None` when unknown.
    pub id: Option<String>,
    /// When the request came in, and when its answer ended (or failed).
    pub start: SystemTime,
    pub end: SystemTime,
}

/// Something that fixes what went wrong before it, if nothing recurs: a restart asked
/// for, a reload or rebuild that succeeded, a request that went through, a page loaded
/// again. The caller gathers them ([`report`](crate::report) decides what each fixes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub scope: Scope,
    pub kind: FixKind,
    pub at: SystemTime,
}

/// What a [`Fix`] is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A dev process or server (`process:api`): everything it printed, everything a
    /// request it served and a page it served reported.
    Unit(String),
    /// A method and a path (without the query): failures of that request.
    Request { method: String, path: String },
    /// A page, by its path: what it reported.
    Page(String),
}

/// How a [`Fix`] came about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixKind {
    /// Started or restarted on request.
    Restarted,
    /// The tool reloaded or rebuilt without an error (`tool`: `uvicorn`, `vite`, …).
    Reloaded(String),
    /// Ran past its crash-loop window after an automatic restart.
    Recovered,
    /// The same request went through later.
    RequestOk,
    /// The page was loaded again.
    PageReloaded,
}

impl FixKind {
    /// How long after it nothing may recur for it to count: a reload only ships the
    /// change (a bundler compiles lazily, a handler runs on the next request), a page
    /// runs its code after loading.
    pub fn grace(&self) -> Duration {
        match self {
            FixKind::Reloaded(_) => Duration::from_secs(2),
            FixKind::PageReloaded => Duration::from_secs(5),
            FixKind::Restarted | FixKind::Recovered | FixKind::RequestOk => Duration::ZERO,
        }
    }

    /// A short reason: `restarted`, `reloaded (uvicorn)`, …
    pub fn describe(&self) -> String {
        match self {
            FixKind::Restarted => "restarted".into(),
            FixKind::Reloaded(tool) => format!("reloaded ({tool})"),
            FixKind::Recovered => "ran past its crash-loop window".into(),
            FixKind::RequestOk => "the same request succeeded".into(),
            FixKind::PageReloaded => "the page was reloaded".into(),
        }
    }

    /// Stable and short, for JSON: `restarted`, `reloaded`, `recovered`, `request_ok`,
    /// `page_reloaded`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FixKind::Restarted => "restarted",
            FixKind::Reloaded(_) => "reloaded",
            FixKind::Recovered => "recovered",
            FixKind::RequestOk => "request_ok",
            FixKind::PageReloaded => "page_reloaded",
        }
    }
}

impl Observation {
    /// One occurrence at `at`, its text from a program's output until
    /// [`Observation::text_from`] says otherwise; the builder methods below add the rest.
    pub fn new(
        source: impl Into<String>,
        category: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
        at: SystemTime,
    ) -> Self {
        Observation {
            source: source.into(),
            category: category.into(),
            severity,
            message: message.into(),
            location: None,
            context: Vec::new(),
            text_from: TextFrom::Output,
            http: None,
            first_seen: at,
            last_seen: at,
            count: 1,
            raw: serde_json::Value::Null,
            exchange: None,
            page: None,
            unit: None,
            detail: Detail::default(),
        }
    }

    pub fn location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    pub fn context(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.context.push((name.into(), value.into()));
        self
    }

    pub fn text_from(mut self, from: TextFrom) -> Self {
        self.text_from = from;
        self
    }

    pub fn http(mut self, http: Http) -> Self {
        self.http = Some(http);
        self
    }

    /// `count` occurrences, the first at `first_seen` (the last is the `at` given to
    /// [`Observation::new`]).
    pub fn repeated(mut self, count: u64, first_seen: SystemTime) -> Self {
        self.count = count;
        self.first_seen = first_seen;
        self
    }

    pub fn raw(mut self, raw: serde_json::Value) -> Self {
        self.raw = raw;
        self
    }

    pub fn exchange(mut self, exchange: Exchange) -> Self {
        self.exchange = Some(exchange);
        self
    }

    pub fn page(mut self, page: impl Into<String>) -> Self {
        self.page = Some(page.into());
        self
    }

    pub fn unit(mut self, unit: impl Into<String>) -> Self {
        self.unit = Some(unit.into());
        self
    }

    pub fn detail(mut self, detail: Detail) -> Self {
        self.detail = detail;
        self
    }
}

/// What the caller knows about one source it consulted.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceInfo {
    /// `server:NAME`, `process:NAME`, `proxy:NAME` or `browser`.
    pub source: String,
    /// Set when it is down right now (crashed, gave up, failed to start): this
    /// observation is listed whatever the query's `since`, status or limit.
    pub down: Option<Observation>,
}

impl SourceInfo {
    pub fn new(source: impl Into<String>) -> Self {
        SourceInfo {
            source: source.into(),
            down: None,
        }
    }

    pub fn down(mut self, observation: Observation) -> Self {
        self.down = Some(observation);
        self
    }
}

/// The path of a page or request URL: without scheme and host, query and fragment
/// (`http://app.localhost/users?id=2` → `/users`).
pub fn url_path(url: &str) -> &str {
    let rest = match url.find("://") {
        Some(i) => {
            let after = &url[i + 3..];
            after.find('/').map_or("/", |j| &after[j..])
        }
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

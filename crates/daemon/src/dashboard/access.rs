//! Who may use the dashboard: one-time login secrets, the sessions they open, and the
//! checks every request passes before it is served.
//!
//! - `corral dashboard` asks the daemon (over the 0600 control socket) for a login
//!   secret: 256 random bits, good once, for [`LOGIN_VALID`]. It travels in the URL's
//!   fragment, which a browser never sends to a server, and the login page removes it
//!   from the address bar and history before it posts it.
//! - A redeemed secret opens a session: a cookie (`HttpOnly`, `SameSite=Strict`,
//!   `Path=/dashboard`) naming it, and a CSRF token the page reads from its own HTML and
//!   sends back on every state-changing request.
//! - A request is refused unless its `Sec-Fetch-Site` (when the browser sends one) says
//!   it comes from the dashboard's own origin, or is the user's own navigation to a page;
//!   a POST must also carry an `Origin` equal to the dashboard's origin, a JSON body and
//!   the CSRF token. Cookies do not keep ports apart, so another page on a loopback
//!   port is "same-site" and would get a `SameSite=Strict` cookie sent with its request:
//!   the origin and token checks are what refuse it, and without CORS headers it cannot
//!   read an answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login secret can be redeemed.
pub(crate) const LOGIN_VALID: Duration = Duration::from_secs(300);
/// Login secrets waiting to be redeemed; asking for more drops the oldest.
const MAX_LOGINS: usize = 16;
/// Open sessions; a new one closes the one used least recently.
const MAX_SESSIONS: usize = 64;
/// A session unused this long is closed.
const SESSION_IDLE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The session cookie's name.
pub(crate) const COOKIE: &str = "corral_dashboard";

/// One browser's session: what its cookie names.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every POST must carry in `X-Corral-CSRF`.
    pub(crate) csrf: String,
    last_used: Instant,
}

/// The logins handed out and the sessions open, for the daemon's life.
#[derive(Default)]
pub(crate) struct Access {
    logins: Mutex<Vec<(String, Instant)>>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Access {
    /// A new one-time login secret.
    pub(crate) fn new_login(&self) -> String {
        let secret = corral_gateway::http::new_token();
        let mut logins = self.logins.lock().unwrap();
        let now = Instant::now();
        logins.retain(|(_, at)| now.duration_since(*at) < LOGIN_VALID);
        if logins.len() >= MAX_LOGINS {
            logins.remove(0);
        }
        logins.push((secret.clone(), now));
        secret
    }

    /// Redeems a login secret (once): the new session's cookie value and CSRF token.
    pub(crate) fn redeem(&self, secret: &str) -> Option<(String, String)> {
        let now = Instant::now();
        {
            let mut logins = self.logins.lock().unwrap();
            logins.retain(|(_, at)| now.duration_since(*at) < LOGIN_VALID);
            // Every entry is compared, in constant time each: no early exit to time.
            let found = logins.iter().enumerate().fold(None, |hit, (i, (s, _))| {
                if corral_gateway::httpd::constant_time_eq(s.as_bytes(), secret.as_bytes()) {
                    Some(i)
                } else {
                    hit
                }
            })?;
            logins.remove(found);
        }
        let id = corral_gateway::http::new_token();
        let csrf = corral_gateway::http::new_token();
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                csrf: csrf.clone(),
                last_used: now,
            },
        );
        Some((id, csrf))
    }

    /// The session a request's `Cookie` headers name, if it is open.
    pub(crate) fn session<'a>(
        &self,
        cookie_headers: impl Iterator<Item = &'a str>,
    ) -> Option<Session> {
        let ids: Vec<&str> = cookie_headers
            .flat_map(|h| cookie_values(h, COOKIE))
            .collect();
        let mut sessions = self.sessions.lock().unwrap();
        let now = Instant::now();
        for id in ids {
            // The map's lookup is by hash, not by comparing secrets byte by byte
            // against a guess in order.
            if let Some(s) = sessions.get_mut(id)
                && now.duration_since(s.last_used) < SESSION_IDLE
            {
                s.last_used = now;
                return Some(s.clone());
            }
        }
        None
    }

    /// Closes the session a cookie names.
    pub(crate) fn logout<'a>(&self, cookie_headers: impl Iterator<Item = &'a str>) {
        let mut sessions = self.sessions.lock().unwrap();
        for h in cookie_headers {
            for id in cookie_values(h, COOKIE) {
                sessions.remove(id);
            }
        }
    }
}

/// The values of cookie `name` in one `Cookie` header (`a=1; b=2`).
fn cookie_values<'a>(header: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    header.split(';').filter_map(move |pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.trim_matches('"'))
    })
}

/// The `Set-Cookie` value opening session `id`.
pub(crate) fn session_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/dashboard; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that removes the session cookie.
pub(crate) fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// What a request is, for the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// The login page: it shows nothing and does nothing by itself, and is reached from
    /// the launch file (a `file:` page, so `cross-site`): from anywhere.
    Login,
    /// A page the user may open from the address bar or a link in a terminal.
    Page,
    /// Anything the page itself loads or asks for: only from its own origin.
    Subresource,
    /// A state-changing request (POST).
    Change,
}

/// The headers the checks read.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen<'a> {
    pub(crate) host: Option<&'a str>,
    pub(crate) origin: Option<&'a str>,
    pub(crate) fetch_site: Option<&'a str>,
    pub(crate) content_type: Option<&'a str>,
}

/// `Err` names why a request may not be served (before its cookie is looked at).
pub(crate) fn check(purpose: Purpose, seen: Seen<'_>) -> Result<(), String> {
    // Browsers since 2020-2023 send Sec-Fetch-Site on every request; an older browser
    // or a program without it still meets the Origin and token checks below.
    match (purpose, seen.fetch_site) {
        (Purpose::Login, _) | (_, None | Some("same-origin")) => {}
        (Purpose::Page, Some("none")) => {}
        (_, Some(other)) => {
            return Err(format!(
                "a {other} request: the dashboard answers only its own pages \
                 (open it with `corral dashboard`)"
            ));
        }
    }
    if purpose != Purpose::Change {
        return Ok(());
    }
    let own = seen.host.map(|h| format!("http://{h}"));
    match (seen.origin, own) {
        (Some(origin), Some(own)) if origin == own => {}
        (origin, _) => {
            return Err(format!(
                "Origin {} is not the dashboard's own: changes come only from its page",
                origin.unwrap_or("(none)")
            ));
        }
    }
    let json = seen.content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return Err("a change must be sent as application/json".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_secret_opens_one_session_once() {
        let access = Access::default();
        let secret = access.new_login();
        assert!(access.redeem("0".repeat(64).as_str()).is_none());
        let (id, csrf) = access.redeem(&secret).expect("the secret opens a session");
        assert!(access.redeem(&secret).is_none(), "a secret works once");
        let cookie = format!("other=1; {COOKIE}={id}");
        let s = access.session([cookie.as_str()].into_iter()).unwrap();
        assert_eq!(s.csrf, csrf);
        assert!(access.session(["other=1"].into_iter()).is_none());
        assert!(
            access
                .session([format!("{COOKIE}={csrf}").as_str()].into_iter())
                .is_none(),
            "the CSRF token is not a session"
        );
        access.logout([cookie.as_str()].into_iter());
        assert!(access.session([cookie.as_str()].into_iter()).is_none());
    }

    #[test]
    fn logins_are_bounded_and_the_oldest_goes_first() {
        let access = Access::default();
        let first = access.new_login();
        for _ in 0..MAX_LOGINS {
            access.new_login();
        }
        assert!(access.redeem(&first).is_none());
    }

    #[test]
    fn checks_by_purpose() {
        let host = Some("127.0.0.1:4000");
        let page = |site| Seen {
            host,
            fetch_site: site,
            ..Seen::default()
        };
        assert!(check(Purpose::Page, page(Some("none"))).is_ok());
        assert!(check(Purpose::Page, page(None)).is_ok());
        assert!(check(Purpose::Page, page(Some("same-site"))).is_err());
        assert!(check(Purpose::Page, page(Some("cross-site"))).is_err());
        assert!(check(Purpose::Login, page(Some("cross-site"))).is_ok());
        assert!(check(Purpose::Subresource, page(Some("none"))).is_err());
        assert!(check(Purpose::Subresource, page(Some("same-site"))).is_err());
        assert!(check(Purpose::Subresource, page(Some("same-origin"))).is_ok());
        let change = |origin, ct| Seen {
            host,
            origin,
            fetch_site: Some("same-origin"),
            content_type: ct,
        };
        let json = Some("application/json; charset=utf-8");
        assert!(check(Purpose::Change, change(Some("http://127.0.0.1:4000"), json)).is_ok());
        // Another port on the same host is same-site, not the same origin.
        assert!(check(Purpose::Change, change(Some("http://127.0.0.1:4001"), json)).is_err());
        assert!(check(Purpose::Change, change(Some("http://localhost:4000"), json)).is_err());
        assert!(check(Purpose::Change, change(None, json)).is_err());
        assert!(check(Purpose::Change, change(Some("null"), json)).is_err());
        let form = Some("application/x-www-form-urlencoded");
        assert!(check(Purpose::Change, change(Some("http://127.0.0.1:4000"), form)).is_err());
        assert!(check(Purpose::Change, change(Some("http://127.0.0.1:4000"), None)).is_err());
    }

    #[test]
    fn cookies() {
        assert_eq!(
            cookie_values("a=1; corral_dashboard=x;b=2", COOKIE).collect::<Vec<_>>(),
            ["x"]
        );
        assert!(session_cookie("x").contains("HttpOnly; SameSite=Strict"));
    }
}

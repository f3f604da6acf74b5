//! Who may use the dashboard, attacked over real HTTP on the daemon's listener: no
//! session, a used login link, another origin (another loopback port is the same site),
//! no CSRF token, a form post, a rebound `Host`, a cross-site fetch; and what the browser
//! is given to open (the launch page's path, never the secret).

mod common;

use common::http::{Resp, request};
use common::*;
use serde_json::Value;

const CONFIG: &str = r#"
[servers.fx]
command = "{fixture}"
"#;

/// A project with a running daemon; its HTTP address.
fn up(p: &Project) -> String {
    let run = p.run(&["up", "-d"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let endpoint = std::fs::read_to_string(p.dir.join(".corral/endpoint")).unwrap();
    endpoint
        .trim()
        .strip_prefix("http://")
        .and_then(|a| a.strip_suffix("/mcp"))
        .unwrap()
        .to_owned()
}

fn secret_of(link: &str) -> &str {
    link.split_once('#').unwrap().1
}

fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    request(addr, "POST", path, headers, body)
}

/// Signs in with a fresh link: the session cookie and the page's CSRF token.
fn sign_in(p: &Project, addr: &str) -> (String, String) {
    let link = dashboard_link(p);
    let origin = format!("http://{addr}");
    let r = post(
        addr,
        "/dashboard/login",
        &[("Origin", &origin), ("Content-Type", "application/json")],
        &format!(r#"{{"secret":"{}"}}"#, secret_of(&link)),
    );
    assert_eq!(r.status, 204, "{r:?}");
    let cookie = r.header("set-cookie").unwrap().to_owned();
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = request(addr, "GET", "/dashboard/", &[("Cookie", &pair)], "");
    assert_eq!(page.status, 200, "{page:?}");
    let csrf = page
        .body
        .split("name=\"corral-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    (pair, csrf)
}

fn pid_of_fx(p: &Project) -> u64 {
    ps_row(p, "fx")["pid"].as_u64().unwrap()
}

#[test]
fn every_dashboard_url_is_refused_without_a_session_and_a_login_link_works_once() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let addr = up(&p);
    let origin = format!("http://{addr}");
    let json = ("Content-Type", "application/json");

    // Without a session cookie: nothing but the login page answers, and what answers
    // says what to do, not what the project holds.
    let gets = [
        "/dashboard",
        "/dashboard/",
        "/dashboard/app.js",
        "/dashboard/app.css",
        "/dashboard/api/stream",
        "/dashboard/api/logs?unit=fx",
        "/dashboard/api/traffic?proxy=web",
        "/dashboard/api/tools",
        "/dashboard/api/errors",
        "/dashboard/no-such-file",
    ];
    for path in gets {
        let r = request(&addr, "GET", path, &[], "");
        assert_eq!(r.status, 401, "GET {path}: {r:?}");
        assert!(r.body.contains("corral dashboard"), "GET {path}: {r:?}");
        assert!(
            !r.body.contains("fx"),
            "GET {path} tells of the project: {r:?}"
        );
        assert!(
            r.header("content-security-policy")
                .is_some_and(|c| c.contains("default-src 'none'")),
            "GET {path}: {r:?}"
        );
    }
    for path in [
        "/dashboard/api/call",
        "/dashboard/api/action",
        "/dashboard/api/logout",
    ] {
        let r = post(&addr, path, &[("Origin", &origin), json], "{}");
        assert_eq!(r.status, 401, "POST {path}: {r:?}");
    }
    // A forged cookie is no session.
    let forged = format!("corral_dashboard={}", "a".repeat(64));
    let r = request(&addr, "GET", "/dashboard/", &[("Cookie", &forged)], "");
    assert_eq!(r.status, 401, "{r:?}");

    // The login page itself answers (it holds nothing), with the policy.
    let r = request(&addr, "GET", "/dashboard/login", &[], "");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("content-security-policy").is_some(), "{r:?}");

    // The link: good once, only from the dashboard's own origin.
    let link = dashboard_link(&p);
    assert!(
        link.starts_with(&format!("http://{addr}/dashboard/login#")),
        "{link}"
    );
    let body = format!(r#"{{"secret":"{}"}}"#, secret_of(&link));
    let other_port = format!("http://{}", closed_addr());
    let r = post(
        &addr,
        "/dashboard/login",
        &[("Origin", &other_port), json],
        &body,
    );
    assert_eq!(r.status, 403, "another origin's login: {r:?}");
    let r = post(
        &addr,
        "/dashboard/login",
        &[("Origin", &origin), json],
        &body,
    );
    assert_eq!(r.status, 204, "{r:?}");
    let cookie = r.header("set-cookie").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/dashboard"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    let r = post(
        &addr,
        "/dashboard/login",
        &[("Origin", &origin), json],
        &body,
    );
    assert_eq!(r.status, 403, "a used link: {r:?}");
    assert!(r.body.contains("used already"), "{r:?}");
    let r = post(
        &addr,
        "/dashboard/login",
        &[("Origin", &origin), json],
        r#"{"secret":""}"#,
    );
    assert_eq!(r.status, 403, "{r:?}");
}

#[test]
fn a_change_needs_the_pages_origin_its_token_and_json() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let addr = up(&p);
    let (cookie, csrf) = sign_in(&p, &addr);
    let origin = format!("http://{addr}");
    let other_port = format!("http://{}", closed_addr());
    let pid = pid_of_fx(&p);
    let restart = r#"{"action":"restart","name":"fx"}"#;
    let attempts: [(&str, Vec<(&str, &str)>); 7] = [
        (
            "no CSRF token",
            vec![
                ("Cookie", &cookie),
                ("Origin", &origin),
                ("Content-Type", "application/json"),
            ],
        ),
        (
            "a wrong CSRF token",
            vec![
                ("Cookie", &cookie),
                ("Origin", &origin),
                ("Content-Type", "application/json"),
                ("X-Corral-CSRF", "0000"),
            ],
        ),
        (
            "another loopback port's page (same site, another origin)",
            vec![
                ("Cookie", &cookie),
                ("Origin", &other_port),
                ("Content-Type", "application/json"),
                ("X-Corral-CSRF", &csrf),
                ("Sec-Fetch-Site", "same-site"),
            ],
        ),
        (
            "another origin, from a browser that sends no Sec-Fetch-Site",
            vec![
                ("Cookie", &cookie),
                ("Origin", &other_port),
                ("Content-Type", "application/json"),
                ("X-Corral-CSRF", &csrf),
            ],
        ),
        (
            "no Origin",
            vec![
                ("Cookie", &cookie),
                ("Content-Type", "application/json"),
                ("X-Corral-CSRF", &csrf),
            ],
        ),
        (
            "a form post (no preflight)",
            vec![
                ("Cookie", &cookie),
                ("Origin", &origin),
                ("Content-Type", "text/plain"),
                ("X-Corral-CSRF", &csrf),
            ],
        ),
        (
            "a rebound Host",
            vec![
                ("Host", "evil.example"),
                ("Cookie", &cookie),
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/json"),
                ("X-Corral-CSRF", &csrf),
            ],
        ),
    ];
    for (what, headers) in &attempts {
        let r = post(&addr, "/dashboard/api/action", headers, restart);
        assert_eq!(r.status, 403, "{what}: {r:?}");
    }
    assert_eq!(pid_of_fx(&p), pid, "a refused request restarted the server");

    // Reading is refused to another site's fetch as well, cookie or not.
    let r = request(
        &addr,
        "GET",
        "/dashboard/api/tools",
        &[("Cookie", &cookie), ("Sec-Fetch-Site", "same-site")],
        "",
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.header("access-control-allow-origin").is_none(), "{r:?}");

    // The page itself may: the same request with everything in order restarts it.
    let r = post(
        &addr,
        "/dashboard/api/action",
        &[
            ("Cookie", &cookie),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("X-Corral-CSRF", &csrf),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        restart,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let answer: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert_ne!(answer["result"]["pid"].as_u64(), Some(pid), "{answer}");

    // Logging out ends the session.
    let r = post(
        &addr,
        "/dashboard/api/logout",
        &[
            ("Cookie", &cookie),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("X-Corral-CSRF", &csrf),
        ],
        "{}",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let r = request(&addr, "GET", "/dashboard/", &[("Cookie", &cookie)], "");
    assert_eq!(r.status, 401, "{r:?}");
}

#[test]
fn the_browser_is_given_the_launch_pages_path_never_the_secret() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let addr = up(&p);
    // A "browser" that records the arguments it was started with (every user of the
    // machine can read a process's arguments).
    let argv = p.dir.join("browser-argv");
    let browser = p.dir.join("browser.sh");
    std::fs::write(
        &browser,
        format!("#!/bin/sh\necho \"$@\" > {}\n", argv.display()),
    )
    .unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = p
        .cmd(&["dashboard"])
        .env("BROWSER", &browser)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("opened the dashboard"),
        "{out:?}"
    );
    let mut given = String::new();
    wait_until("the browser to be started", || {
        given = std::fs::read_to_string(&argv).unwrap_or_default();
        !given.is_empty()
    });
    let launch = p.dir.join(".corral/dashboard.html");
    assert_eq!(given.trim(), launch.display().to_string());
    let meta = std::fs::metadata(&launch).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The page leads to a working link.
    let page = std::fs::read_to_string(&launch).unwrap();
    let link = page
        .split("url=")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    assert!(
        link.starts_with(&format!("http://{addr}/dashboard/login#")),
        "{page}"
    );
    let r = post(
        &addr,
        "/dashboard/login",
        &[
            ("Origin", &format!("http://{addr}")),
            ("Content-Type", "application/json"),
        ],
        &format!(r#"{{"secret":"{}"}}"#, secret_of(link)),
    );
    assert_eq!(r.status, 204, "{r:?}");
}

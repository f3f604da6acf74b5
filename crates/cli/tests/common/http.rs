//! `corral up` in a test, a tiny HTTP/1.1 client (one request per connection) and a tiny
//! server ([`serve`]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

/// A running `corral up`: its endpoint URL and token.
pub struct Up {
    pub child: Child,
    pub url: String,
    pub addr: String,
    pub token: String,
}

impl Up {
    pub fn start(p: &super::Project) -> Up {
        Self::start_with(p, &[])
    }

    /// [`Up::start`] with `envs` set for `corral up`.
    pub fn start_with(p: &super::Project, envs: &[(&str, &str)]) -> Up {
        let mut child = p
            .cmd(&["up"])
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines
            .next()
            .expect("corral up prints its endpoint")
            .unwrap();
        let url = first
            .strip_prefix("corral: MCP endpoint ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let second = lines.next().unwrap().unwrap();
        let token = second
            .strip_prefix("corral: bearer token ")
            .and_then(|r| r.split(' ').next())
            .unwrap_or("")
            .to_owned();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        std::thread::spawn(move || for _ in lines {});
        Up {
            child,
            url,
            addr,
            token,
        }
    }

    /// POSTs `body` to /mcp with the token and the given extra headers.
    pub fn post(&self, body: &str, headers: &[(&str, &str)]) -> Resp {
        self.post_to("/mcp", body, headers)
    }

    /// [`Up::post`] to `path` (`/mcp/PROFILE`).
    pub fn post_to(&self, path: &str, body: &str, headers: &[(&str, &str)]) -> Resp {
        let mut h = vec![
            ("Authorization", format!("Bearer {}", self.token)),
            ("Content-Type", "application/json".to_owned()),
            ("Accept", "application/json, text/event-stream".to_owned()),
        ];
        for (k, v) in headers {
            h.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
            h.push((k, v.to_string()));
        }
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        request(&self.addr, "POST", path, &h, body)
    }

    /// initialize; returns the session id.
    pub fn initialize(&self) -> String {
        let r = self.post(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            &[],
        );
        assert_eq!(r.status, 200, "{r:?}");
        let sid = r.header("mcp-session-id").expect("session id").to_owned();
        let r = self.post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            &[("Mcp-Session-Id", &sid)],
        );
        assert_eq!(r.status, 202, "{r:?}");
        sid
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON messages of the body: the body itself, or each SSE `data:` line.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).unwrap())
                .collect()
        } else if self.body.is_empty() {
            Vec::new()
        } else {
            vec![serde_json::from_str(&self.body).unwrap()]
        }
    }
}

/// One request on a fresh connection, read to the end.
pub fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(super::DEADLINE)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n..];
        s = s.strip_prefix("\r\n").unwrap_or(s);
    }
    out
}

/// A stand-in web server on a free loopback port, its `host:port`: each request is
/// answered by `answer(path)` (the query cut off) as a status line (`200 OK`), a content
/// type and a body. One thread per connection, `Connection: close`; request bodies are
/// not read.
pub fn serve(
    answer: impl Fn(&str) -> (&'static str, &'static str, String) + Send + Sync + 'static,
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let target = first.split(' ').nth(1).unwrap_or("/");
                let (status, ctype, body) = answer(target.split('?').next().unwrap_or("/"));
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

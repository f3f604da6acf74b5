//! The requests OAuth makes (metadata, registration, tokens, revocation), on the same
//! HTTP stack as the server's traffic — but to URLs that servers and authorization
//! servers name, so held to more: HTTPS only (plain HTTP for loopback hosts alone, for
//! local development and tests), never to link-local addresses (cloud metadata
//! services), no redirects followed, a 1 MiB answer and 30 s at most.

use crate::http::Http;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{HeaderMap, Method, Request, Uri};
use std::net::IpAddr;
use std::time::Duration;

const MAX_BODY: usize = 1024 * 1024;
const DEADLINE: Duration = Duration::from_secs(30);

/// An answer, read whole.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Whether Corral may send OAuth traffic to `url` (see the module docs).
pub fn allowed(url: &Uri) -> Result<(), String> {
    let host = url.host().unwrap_or("");
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ip = bare.parse::<IpAddr>().ok();
    let loopback = bare.eq_ignore_ascii_case("localhost") || ip.is_some_and(|i| i.is_loopback());
    match url.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => {
            return Err(format!(
                "{url} is not an https URL (OAuth endpoints must be; plain http only on this \
                 machine's loopback)"
            ));
        }
    }
    let link_local = match ip {
        Some(IpAddr::V4(v4)) => v4.is_link_local() || v4.is_unspecified() || v4.is_broadcast(),
        Some(IpAddr::V6(v6)) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.is_unspecified()
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
        None => bare.eq_ignore_ascii_case("metadata.google.internal"),
    };
    if link_local || host.is_empty() {
        return Err(format!(
            "{url} points at a host Corral does not send credentials to"
        ));
    }
    Ok(())
}

/// Sends `method url` with `headers` and `body`; the answer whole.
pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<Answer, String> {
    let uri: Uri = url
        .parse()
        .map_err(|_| format!("{url:?} is not a valid URL"))?;
    allowed(&uri)?;
    let http = Http::new(&uri)?;
    let mut req = Request::builder().method(method).uri(uri.clone());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("cannot build a request to {url}: {e}"))?;
    let exchange = async {
        let resp = http.send(req).await.map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the answer of {url}: {e}"))?
            .to_bytes()
            .to_vec();
        Ok(Answer {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(DEADLINE, exchange)
        .await
        .map_err(|_| format!("{url} did not answer within {} s", DEADLINE.as_secs()))?
}

/// A GET of a JSON document.
pub async fn get_json(url: &str) -> Result<Answer, String> {
    send(
        Method::GET,
        url,
        &[("accept", "application/json")],
        Vec::new(),
    )
    .await
}

/// The error type the `oauth2` crate's requests end with.
#[derive(Debug)]
pub struct NetError(pub String);

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetError {}

/// The `oauth2` crate's token and revocation requests, sent by [`send`].
pub async fn for_oauth2(req: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, NetError> {
    let (parts, body) = req.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let a = send(parts.method, &parts.uri.to_string(), &pairs, body)
        .await
        .map_err(NetError)?;
    let mut resp = oauth2::HttpResponse::new(a.body);
    *resp.status_mut() =
        hyper::StatusCode::from_u16(a.status).map_err(|e| NetError(e.to_string()))?;
    *resp.headers_mut() = a.headers;
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_traffic_goes_only_to_https_or_loopback_and_never_to_metadata_services() {
        let ok = |u: &str| u.parse().is_ok_and(|u| allowed(&u).is_ok());
        assert!(ok("https://auth.example.com/token"));
        assert!(ok("http://127.0.0.1:8080/token"));
        assert!(ok("http://[::1]:8080/token"));
        assert!(ok("http://localhost/token"));
        assert!(
            !ok("http://auth.example.com/token"),
            "plain http off loopback"
        );
        assert!(!ok("https://169.254.169.254/latest/meta-data"));
        assert!(!ok("https://[fe80::1]/x"));
        assert!(!ok("https://metadata.google.internal/computeMetadata"));
        assert!(!ok("https://0.0.0.0/x"));
        assert!(!ok("file:///etc/passwd"));
        assert!(!ok("/relative"));
    }
}

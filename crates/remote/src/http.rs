//! The HTTP client of one remote server: hyper's pooled client over rustls (the system's
//! trusted roots, `SSL_CERT_FILE`/`SSL_CERT_DIR` honoured), through the proxy that
//! `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` name unless `NO_PROXY` exempts the host (a
//! loopback host is never proxied). A failure is told in words a user can act on.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::rt::TokioExecutor;
use std::error::Error as StdError;
use std::time::Duration;

/// How long connecting (TCP, the proxy's CONNECT and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keep-alive on every connection, so that intermediaries do not cut an idle stream.
const KEEPALIVE: Duration = Duration::from_secs(30);

type Direct = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;
type Proxied = Client<HttpsConnector<Tunnel<HttpConnector>>, Full<Bytes>>;

/// A client for one server's URL.
pub struct Http {
    inner: Inner,
    /// Said in failures: "through proxy http://proxy:3128".
    pub via: Option<String>,
}

enum Inner {
    Direct(Direct),
    Proxied(Proxied),
}

impl Http {
    /// The client for `url`: direct, or through the proxy the environment names for it.
    pub fn new(url: &Uri) -> Result<Http, String> {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        tcp.set_keepalive(Some(KEEPALIVE));
        tcp.set_nodelay(true);
        let tls =
            || tls_config().map(|c| hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(c));
        let proxy = if is_loopback(url) {
            None
        } else {
            hyper_util::client::proxy::matcher::Matcher::from_env().intercept(url)
        };
        let builder = Client::builder(TokioExecutor::new());
        Ok(match proxy {
            None => Http {
                inner: Inner::Direct(
                    builder.build(tls()?.https_or_http().enable_http1().wrap_connector(tcp)),
                ),
                via: None,
            },
            Some(p) => {
                let mut tunnel = Tunnel::new(p.uri().clone(), tcp);
                if let Some(auth) = p.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                Http {
                    inner: Inner::Proxied(
                        builder.build(tls()?.https_or_http().enable_http1().wrap_connector(tunnel)),
                    ),
                    via: Some(format!(
                        "through proxy {}://{}",
                        p.uri().scheme_str().unwrap_or("http"),
                        p.uri().authority().map_or("?", |a| a.as_str())
                    )),
                }
            }
        })
    }

    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
        let r = match &self.inner {
            Inner::Direct(c) => c.request(req).await,
            Inner::Proxied(c) => c.request(req).await,
        };
        r.map_err(|e| {
            let why = describe(&e);
            match &self.via {
                Some(via) => format!("{why} ({via})"),
                None => why,
            }
        })
    }
}

/// The TLS settings every client of this process uses: rustls (ring) with the system's
/// trusted roots, read once (a root store is hundreds of certificates parsed; OAuth makes
/// a client per request).
fn tls_config() -> Result<rustls::ClientConfig, String> {
    use hyper_rustls::ConfigBuilderExt;
    static CONFIG: std::sync::OnceLock<Result<rustls::ClientConfig, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let load = || -> std::io::Result<rustls::ClientConfig> {
                Ok(
                    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                        rustls::crypto::ring::default_provider(),
                    ))
                    .with_safe_default_protocol_versions()
                    .map_err(std::io::Error::other)?
                    .with_native_roots()?
                    .with_no_client_auth(),
                )
            };
            load().map_err(|e| format!("cannot load the system's trusted TLS certificates: {e}"))
        })
        .clone()
}

fn is_loopback(url: &Uri) -> bool {
    let host = url.host().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What went wrong, in words: the certificate problem, "connection refused", the DNS
/// failure, a timeout … rather than the error's type names.
pub fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut chain: Vec<&(dyn StdError + 'static)> = Vec::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        chain.push(c);
        cur = c.source();
    }
    for c in &chain {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return format!("TLS: {}", tls_words(tls));
        }
    }
    for c in &chain {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            // rustls' errors reach us wrapped in io errors.
            if let Some(tls) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return format!("TLS: {}", tls_words(tls));
            }
            use std::io::ErrorKind as K;
            let words = match io.kind() {
                K::ConnectionRefused => "connection refused (is the server running, on that port?)",
                K::ConnectionReset => "connection reset by the server",
                K::TimedOut => "timed out connecting",
                K::HostUnreachable | K::NetworkUnreachable => "host unreachable",
                K::UnexpectedEof => "the server closed the connection during the TLS handshake",
                _ => "",
            };
            if !words.is_empty() {
                return words.to_owned();
            }
        }
    }
    let text: Vec<String> = chain.iter().map(|c| c.to_string()).collect();
    let joined = text.join(": ");
    // rustls' error can sit behind a boxed error that hides its type from the downcasts
    // above (a `Box<dyn Error>` is not the error it holds): its words then.
    if let Some(words) = tls_words_in(&joined) {
        return format!("TLS: {words}");
    }
    if joined.contains("dns error") {
        let detail = text.last().cloned().unwrap_or_default();
        return format!("DNS lookup failed: {detail}");
    }
    if joined.contains("tunnel error") || joined.contains("proxy") {
        return format!("the proxy refused or failed the tunnel: {joined}");
    }
    if joined.contains("HTTP connect timeout") || joined.contains("timed out") {
        return format!("timed out connecting ({} s)", CONNECT_TIMEOUT.as_secs());
    }
    joined
}

/// [`tls_words`] for an error known only by its text.
fn tls_words_in(text: &str) -> Option<String> {
    if let Some(at) = text.find("invalid peer certificate: ") {
        let what = &text[at + "invalid peer certificate: ".len()..];
        let cert = |words: &str| Some(words.to_owned());
        // (The variant's name, or its `…Context` form's sentence.)
        return if what.starts_with("UnknownIssuer") {
            cert(UNTRUSTED)
        } else if what.starts_with("Expired") || what.starts_with("certificate expired") {
            cert("the server's certificate has expired")
        } else if what.starts_with("NotValidYet") || what.starts_with("certificate not valid yet") {
            cert("the server's certificate is not valid yet (check the clock)")
        } else if what.starts_with("NotValidForName")
            || what.starts_with("certificate not valid for name")
        {
            Some(format!(
                "the server's certificate is for another host name ({what})"
            ))
        } else if what.starts_with("Revoked") {
            cert("the server's certificate is revoked")
        } else {
            Some(format!("the server's certificate was refused: {what}"))
        };
    }
    if text.contains("received fatal alert") {
        return Some(format!(
            "the server refused the TLS handshake ({})",
            text.rsplit(": ").next().unwrap_or(text)
        ));
    }
    if text.contains("received corrupt message") || text.contains("InvalidContentType") {
        return Some("the server does not speak TLS there (an http:// URL?)".to_owned());
    }
    None
}

const UNTRUSTED: &str = "the server's certificate is not trusted (issued by an unknown \
                         authority; a private CA goes in SSL_CERT_FILE)";

fn tls_words(e: &rustls::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => UNTRUSTED.into(),
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet (check the clock)".into()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the server's certificate is for another host name".into()
            }
            C::Revoked => "the server's certificate is revoked".into(),
            C::BadSignature => "the server's certificate has a bad signature".into(),
            other => format!("the server's certificate was refused: {other:?}"),
        },
        E::AlertReceived(a) => format!("the server refused the TLS handshake ({a:?})"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the server does not speak TLS there (an http:// URL?)".into()
        }
        other => other.to_string(),
    }
}

//! A plain HTTP/1.1 client for the tests' own requests (a fresh connection each).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{HeaderMap, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A response, its body as text.
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// `GET url`, within the harness deadline.
pub async fn get(url: &str) -> Got {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let uri: hyper::Uri = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    let fut = async {
        let resp = client.get(uri).await.map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok::<_, String>(Got {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    match tokio::time::timeout(super::DEADLINE, fut).await {
        Ok(Ok(got)) => got,
        Ok(Err(e)) => panic!("GET {url}: {e}"),
        Err(_) => panic!("GET {url}: no response within {:?}", super::DEADLINE),
    }
}

//! A stand-in dev server: fixed responses by path on 127.0.0.1, a port the OS picks.

use bytes::Bytes;
use corral_proxy::{ProxyBody, full};
use hyper::{Response, StatusCode};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// One fixed response.
#[derive(Clone)]
pub struct Fixed {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
}

pub struct Target {
    pub addr: SocketAddr,
    /// The paths requested, in order (what reached the target, past the proxy).
    pub requests: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
}

impl Target {
    /// Serves `routes` (path → response); any other path is a 404.
    pub async fn start(routes: Vec<(&'static str, Fixed)>) -> Target {
        let routes: Arc<HashMap<&'static str, Fixed>> = Arc::new(routes.into_iter().collect());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = requests.clone();
        tokio::spawn(corral_httpd::serve(
            listener,
            corral_httpd::Limits::default(),
            stop.clone().cancelled_owned(),
            move |req: hyper::Request<hyper::body::Incoming>| {
                let routes = routes.clone();
                let seen = seen.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    seen.lock().unwrap().push(path.clone());
                    let response: Response<ProxyBody> = match routes.get(path.as_str()) {
                        Some(f) => Response::builder()
                            .status(f.status)
                            .header("content-type", f.content_type)
                            .header("cache-control", "no-store")
                            .body(full(f.body.clone()))
                            .unwrap(),
                        None => Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .header("content-type", "text/plain")
                            .body(full("not found"))
                            .unwrap(),
                    };
                    response
                }
            },
        ));
        Target {
            addr,
            requests,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub fn ok(content_type: &'static str, body: impl Into<Bytes>) -> Fixed {
    Fixed {
        status: StatusCode::OK,
        content_type,
        body: body.into(),
    }
}

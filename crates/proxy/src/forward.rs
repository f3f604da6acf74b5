//! Forwarding one request to the target and its response back (owner: the forwarding
//! work). See the crate docs for what is rewritten on the way.

use crate::{ProxyBody, Shared};
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::sync::Arc;

/// The HTTP client every request of a proxy shares (keep-alive pool to the target).
pub(crate) type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    ProxyBody,
>;

pub(crate) fn client() -> Client {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

/// Serves one request: `/__corral/…` by [`crate::browser`], anything else forwarded.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ProxyBody> {
    if req.uri().path().starts_with(crate::browser::PREFIX) {
        return crate::browser::handle(shared, req).await;
    }
    let _ = shared;
    todo!("forward")
}

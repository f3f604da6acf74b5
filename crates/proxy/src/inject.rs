//! Inserting the browser error script into HTML documents (owner: the injection work).
//!
//! [`request`] runs on every forwarded request before it leaves, [`response`] on every
//! response head from the target; a response that is not an HTML document passes
//! untouched.

use crate::{ProxyBody, Shared};

/// Adjusts a request about to be forwarded (e.g. limits `Accept-Encoding` to codings the
/// rewriter can decode).
pub(crate) fn request(shared: &Shared, parts: &mut hyper::http::request::Parts) {
    let _ = (shared, parts);
}

/// The body to send for a response from the target: `body` itself, or the rewritten
/// document (then `parts` is fixed up: encoding, length, CSP).
pub(crate) fn response(
    shared: &Shared,
    parts: &mut hyper::http::response::Parts,
    body: ProxyBody,
) -> ProxyBody {
    let _ = (shared, parts);
    body
}

//! Finding who authorizes a server, as MCP's authorization specification says: the
//! protected resource's metadata (RFC 9728) from the challenge's `resource_metadata` or
//! the well-known paths, then the authorization server's metadata (RFC 8414, then
//! OpenID Connect discovery), each checked before it is trusted. A server of the
//! 2025-03-26 era without resource metadata: the authorization server's metadata at the
//! server's own origin, else its default endpoints.

use super::net;
use corral_httpd::challenge::Bearer;
use oauth2::url::Url;
use serde::Deserialize;

/// The protected resource's metadata that matters here.
#[derive(Debug, Clone, Deserialize)]
pub struct Resource {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// The authorization server's metadata that matters here.
#[derive(Debug, Clone, Deserialize)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    #[serde(default)]
    pub response_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

/// Who authorizes a server, found and checked.
#[derive(Debug, Clone)]
pub struct Found {
    /// The resource the tokens are for (the `resource` parameter).
    pub resource: String,
    /// Scopes to ask for: the challenge's, else the resource's.
    pub scopes: Vec<String>,
    pub server: AuthServer,
}

/// Finds and checks the authorization server of the MCP server at `url`, which answered
/// with `challenge`.
pub async fn discover(url: &str, challenge: &Bearer) -> Result<Found, String> {
    let server_url =
        Url::parse(url).map_err(|e| format!("the server's url {url:?} is not valid: {e}"))?;
    let Some(prm) = resource_metadata(&server_url, challenge).await? else {
        // No resource metadata: the 2025-03-26 way, at the server's origin.
        let server = legacy(&server_url).await?;
        let scopes = split(challenge.scope.as_deref());
        return Ok(Found {
            resource: url.to_owned(),
            scopes,
            server,
        });
    };
    let Some(issuer) = prm.authorization_servers.first() else {
        return Err(format!(
            "the resource metadata of {url} names no authorization server \
             (authorization_servers is empty)"
        ));
    };
    let server = authorization_server(issuer).await?;
    let scopes = match challenge.scope.as_deref() {
        Some(s) => split(Some(s)),
        None => prm.scopes_supported.clone(),
    };
    Ok(Found {
        resource: prm.resource,
        scopes,
        server,
    })
}

fn split(s: Option<&str>) -> Vec<String> {
    s.unwrap_or("")
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The resource metadata: at the challenge's `resource_metadata`, else at the
/// well-known path with the server's path, else at the bare well-known path. `None` when
/// the server publishes none.
async fn resource_metadata(url: &Url, challenge: &Bearer) -> Result<Option<Resource>, String> {
    let mut candidates = Vec::new();
    if let Some(m) = &challenge.resource_metadata {
        candidates.push(m.clone());
    } else {
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        if !path.is_empty() {
            candidates.push(format!(
                "{origin}/.well-known/oauth-protected-resource{path}"
            ));
        }
        candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    }
    for c in &candidates {
        let a = net::get_json(c).await?;
        if a.status == 404 || (!a.ok() && challenge.resource_metadata.is_none()) {
            continue;
        }
        if !a.ok() {
            return Err(format!(
                "the resource metadata at {c} (named by the server's challenge) answered HTTP {}",
                a.status
            ));
        }
        let prm: Resource = serde_json::from_slice(&a.body)
            .map_err(|e| format!("the resource metadata at {c} is not RFC 9728 metadata: {e}"))?;
        if !same_resource(&prm.resource, url) {
            return Err(format!(
                "the resource metadata at {c} is for {:?}, not for {url}: not trusted \
                 (a server may only name its own metadata)",
                prm.resource
            ));
        }
        return Ok(Some(prm));
    }
    Ok(None)
}

/// Whether metadata's `resource` names the server at `url`: the same URL (a trailing
/// slash aside), or its origin with a path that `url`'s path begins with.
fn same_resource(resource: &str, url: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != url.origin() || r.query().is_some() || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let up = url.path().trim_end_matches('/');
    up == rp || up.starts_with(&format!("{rp}/"))
}

/// The authorization server `issuer`'s metadata, from the first well-known location
/// that has it, in the order the specification gives; checked.
pub async fn authorization_server(issuer: &str) -> Result<AuthServer, String> {
    let iss = Url::parse(issuer).map_err(|e| {
        format!("the authorization server {issuer:?} named by the resource is not a URL: {e}")
    })?;
    let origin = iss.origin().ascii_serialization();
    let path = iss.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    let mut tried = Vec::new();
    for c in &candidates {
        let a = net::get_json(c).await?;
        if a.status == 404 {
            tried.push(format!("{c} (404)"));
            continue;
        }
        if !a.ok() {
            return Err(format!(
                "the authorization server's metadata at {c} answered HTTP {}",
                a.status
            ));
        }
        let Ok(m) = serde_json::from_slice::<AuthServer>(&a.body) else {
            tried.push(format!("{c} (not metadata)"));
            continue;
        };
        if m.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(format!(
                "the metadata at {c} is for issuer {:?}, not {issuer:?}: not trusted",
                m.issuer
            ));
        }
        check(&m, c)?;
        return Ok(m);
    }
    Err(format!(
        "no authorization server metadata for {issuer}: tried {}",
        tried.join(", ")
    ))
}

/// What Corral needs of an authorization server: the code flow, PKCE with S256, and
/// endpoints it may talk to.
fn check(m: &AuthServer, at: &str) -> Result<(), String> {
    if let Some(types) = &m.response_types_supported
        && !types.iter().any(|t| t == "code")
    {
        return Err(format!(
            "the authorization server at {at} does not offer the authorization code flow"
        ));
    }
    match &m.code_challenge_methods_supported {
        Some(methods) if methods.iter().any(|x| x == "S256") => {}
        _ => {
            return Err(format!(
                "the authorization server at {at} does not say it supports PKCE with S256 \
                 (code_challenge_methods_supported), which MCP requires: Corral will not \
                 authorize without it"
            ));
        }
    }
    for e in [&m.authorization_endpoint, &m.token_endpoint]
        .into_iter()
        .chain(m.registration_endpoint.iter())
        .chain(m.revocation_endpoint.iter())
    {
        let uri = e.parse().map_err(|_| {
            format!("the metadata at {at} names an endpoint that is not a URL: {e:?}")
        })?;
        net::allowed(&uri).map_err(|why| format!("the metadata at {at}: {why}"))?;
    }
    Ok(())
}

/// A 2025-03-26 server without resource metadata: the authorization server's metadata
/// at the server's origin, else the default endpoints there.
async fn legacy(url: &Url) -> Result<AuthServer, String> {
    let origin = url.origin().ascii_serialization();
    let at = format!("{origin}/.well-known/oauth-authorization-server");
    let a = net::get_json(&at).await?;
    if a.ok()
        && let Ok(m) = serde_json::from_slice::<AuthServer>(&a.body)
    {
        check(&m, &at)?;
        return Ok(m);
    }
    Err(format!(
        "{url} asks for OAuth but publishes neither resource metadata (RFC 9728) nor \
         authorization server metadata at {at} (HTTP {}); Corral cannot tell where to \
         authorize",
        a.status
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_must_name_the_server_itself() {
        let u = Url::parse("https://mcp.example.com/v1/mcp").unwrap();
        assert!(same_resource("https://mcp.example.com/v1/mcp", &u));
        assert!(same_resource("https://mcp.example.com/v1/mcp/", &u));
        assert!(same_resource("https://mcp.example.com/v1", &u));
        assert!(same_resource("https://mcp.example.com/", &u));
        assert!(!same_resource("https://mcp.example.com/v1/mc", &u));
        assert!(!same_resource("https://evil.example.com/v1/mcp", &u));
        assert!(!same_resource("http://mcp.example.com/v1/mcp", &u));
        assert!(!same_resource("https://mcp.example.com:8443/v1/mcp", &u));
        assert!(!same_resource("not a url", &u));
    }
}

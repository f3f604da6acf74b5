//! OAuth 2.1 for remote MCP servers, as MCP's authorization specification describes it:
//! discovery ([`discover`], reading the server's challenge with
//! [`corral_httpd::challenge`]), client registration and the authorization code flow with
//! PKCE that `corral auth NAME` runs ([`flow`]), the per-user token store ([`store`]),
//! and the daemon's side: the bearer on every request, one refresh at a time shared by
//! every agent, a refresh before expiry, one retry after a 401 ([`credentials`]).
//!
//! The `oauth2` crate builds the authorization URL (PKCE S256) and makes the token and
//! revocation requests, over Corral's own HTTP client ([`net`]); what it does not do —
//! discovery, registration, the store, refresh coordination — is here.

pub mod credentials;
pub mod discover;
pub mod flow;
pub mod net;
pub mod store;

use oauth2::basic::BasicClient;
use oauth2::{AuthType, ClientId, ClientSecret, TokenResponse, TokenUrl};
use std::time::Duration;
use store::{Record, Tokens};

/// The exit code of `corral __remote` when the server needs `corral auth NAME` (EX_NOPERM
/// in sysexits.h): the supervisor then holds the server in `needs_auth` instead of
/// restarting it.
pub const EXIT_NEEDS_AUTH: u8 = 77;

/// The sentence every place that reports a server needing authorization uses.
pub fn needs_auth_sentence(name: &str, why: &str) -> String {
    format!("needs authorization ({why}): run `corral auth {name}`")
}

/// How a token request failed.
#[derive(Debug)]
pub enum Refused {
    /// The grant is gone (`invalid_grant`, an unknown client …): only a new
    /// authorization helps.
    Rejected(String),
    /// The network, the server's 5xx, garbage: try again later.
    Transient(String),
}

/// The token requests of a record's client: refresh.
fn client_of(
    record: &Record,
) -> Result<
    BasicClient<
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointSet,
    >,
    String,
> {
    let token = TokenUrl::new(record.token_endpoint.clone()).map_err(|e| {
        format!(
            "the token endpoint {:?} is not a URL: {e}",
            record.token_endpoint
        )
    })?;
    let mut c = BasicClient::new(ClientId::new(record.client.id.clone())).set_token_uri(token);
    match &record.client.secret {
        Some(s) => c = c.set_client_secret(ClientSecret::new(s.clone())),
        None => c = c.set_auth_type(AuthType::RequestBody),
    }
    Ok(c)
}

/// Tokens from a token response received now; a refresh token the answer lacks is the
/// old one (RFC 6749 §6: the server may keep it).
fn tokens_of(
    resp: &oauth2::basic::BasicTokenResponse,
    old_refresh: Option<&str>,
    asked_scope: Option<&str>,
) -> Tokens {
    let now = store::now();
    Tokens {
        access: resp.access_token().secret().clone(),
        refresh: resp
            .refresh_token()
            .map(|r| r.secret().clone())
            .or_else(|| old_refresh.map(str::to_owned)),
        expires_at: resp.expires_in().map(|d| now + d.as_secs()),
        received_at: now,
        scope: resp
            .scopes()
            .map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
            .or_else(|| asked_scope.map(str::to_owned)),
    }
}

/// Redeems `record`'s refresh token: the new tokens (with the rotated refresh token).
pub async fn refresh(record: &Record) -> Result<Tokens, Refused> {
    let Some(rt) = record.tokens.as_ref().and_then(|t| t.refresh.clone()) else {
        return Err(Refused::Rejected("the grant has no refresh token".into()));
    };
    let client = client_of(record).map_err(Refused::Rejected)?;
    let rt_token = oauth2::RefreshToken::new(rt.clone());
    let resp = client
        .exchange_refresh_token(&rt_token)
        .add_extra_param("resource", &record.resource)
        .request_async(&net::for_oauth2)
        .await;
    match resp {
        Ok(r) => Ok(tokens_of(
            &r,
            Some(&rt),
            record.tokens.as_ref().and_then(|t| t.scope.as_deref()),
        )),
        Err(e) => Err(classify(e)),
    }
}

/// A token request's failure, in words, rejected or transient.
fn classify<RE: std::error::Error + 'static>(
    e: oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> Refused {
    use oauth2::RequestTokenError as E;
    use oauth2::basic::BasicErrorResponseType as T;
    match e {
        E::ServerResponse(r) => {
            let what = match r.error_description() {
                Some(d) => format!("{} ({d})", r.error()),
                None => r.error().to_string(),
            };
            let what = format!("the authorization server refused: {what}");
            match r.error() {
                T::InvalidGrant | T::InvalidClient | T::UnauthorizedClient => {
                    Refused::Rejected(what)
                }
                _ => Refused::Transient(what),
            }
        }
        E::Request(e) => Refused::Transient(format!("the token request failed: {e}")),
        E::Parse(_, body) => Refused::Transient(format!(
            "the token endpoint's answer is not a token response: {}",
            crate::quote(&body)
        )),
        E::Other(o) => Refused::Transient(format!(
            "the token endpoint's answer is not a token response ({o})"
        )),
    }
}

/// When to refresh tokens received at `received_at` that expire at `expires_at`: two
/// minutes before, or a quarter of their lifetime before when they live less than eight.
pub fn refresh_point(t: &Tokens) -> Option<u64> {
    let expires = t.expires_at?;
    let life = expires.saturating_sub(t.received_at);
    let margin = Duration::from_secs(120)
        .min(Duration::from_secs(life / 4))
        .as_secs();
    Some(expires.saturating_sub(margin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_refreshed_before_they_expire() {
        let t = |life: u64| Tokens {
            expires_at: Some(1000 + life),
            received_at: 1000,
            ..Tokens::default()
        };
        assert_eq!(refresh_point(&t(3600)), Some(1000 + 3600 - 120));
        assert_eq!(refresh_point(&t(40)), Some(1000 + 30));
        assert_eq!(refresh_point(&t(0)), Some(1000));
        assert_eq!(refresh_point(&Tokens::default()), None);
    }
}

//! `corral auth NAME`: the authorization code flow with PKCE, run by the user's command
//! (the daemon never opens a browser). It asks the server without credentials for its
//! challenge, discovers the authorization server, reuses or registers a client, sends
//! the user to the authorization URL and takes the answer on a loopback address — or,
//! over SSH where the browser cannot reach this machine's loopback, from the address
//! the browser ended on, pasted into the terminal — then redeems the code and keeps the
//! tokens in the store. `--logout` revokes and forgets them.

use super::discover::{self, Found};
use super::net;
use super::store::{Client, Record, Store};
use bytes::Bytes;
use corral_config::{OAuthClient, ServerConfig, Transport};
use corral_httpd::challenge::{self, Bearer};
use http_body_util::Full;
use hyper::{Method, Request, Response};
use oauth2::basic::BasicClient;
use oauth2::url::Url;
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    RedirectUrl, Scope, TokenUrl,
};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

/// A remote server to authorize, as its project configures it.
#[derive(Debug, Clone)]
pub struct Target {
    pub project: PathBuf,
    pub name: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// `[servers.NAME.oauth]`: a client registered by hand, instead of registering one.
    pub configured: OAuthClient,
}

impl Target {
    /// Server `name` of the project at `project`, as configured in `server`; `None` for a
    /// stdio server (only remote ones use OAuth).
    pub fn of(project: &std::path::Path, name: &str, server: &ServerConfig) -> Option<Target> {
        let Transport::Http {
            url,
            headers,
            oauth,
            ..
        } = &server.transport
        else {
            return None;
        };
        Some(Target {
            project: project.to_owned(),
            name: name.to_owned(),
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            configured: oauth.clone(),
        })
    }

    pub fn store(&self) -> Result<Store, String> {
        Store::of(&self.project, &self.name, &self.url)
    }
}

/// How the user is reached.
pub struct Options {
    /// Open the authorization URL in a browser (`$BROWSER`, else the desktop's opener).
    pub open_browser: bool,
    /// How long to wait for the user.
    pub timeout: Duration,
    /// Also take the address the browser ends on pasted on stdin (a terminal's user).
    pub paste: bool,
    /// Gets the authorization URL as soon as it is made (the dashboard opens it).
    pub url_to: Option<tokio::sync::oneshot::Sender<String>>,
}

/// The redirect's query: a code or an error, with the state and issuer.
#[derive(Debug, Default)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Callback {
    fn of(url: &Url) -> Callback {
        let mut c = Callback::default();
        for (k, v) in url.query_pairs() {
            let v = Some(v.into_owned());
            match &*k {
                "code" => c.code = v,
                "state" => c.state = v,
                "iss" => c.iss = v,
                "error" => c.error = v,
                "error_description" => c.error_description = v,
                _ => {}
            }
        }
        c
    }
}

/// Runs the flow for `t`, telling the user on `out`; the summary when authorized.
pub async fn login(
    t: &Target,
    mut opts: Options,
    out: &mut (dyn Write + Send),
) -> Result<String, String> {
    let challenge = ask_for_challenge(t).await?;
    let found = discover::discover(&t.url, &challenge).await?;
    let issuer = found.server.issuer.clone();
    let store = t.store()?;
    let existing = store.load().map_err(|e| e.to_string())?;

    // The answer comes to a loopback address the OS picks, never a fixed port.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1 for the authorization's answer: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");

    let client = client_for(t, &found, existing.as_ref(), &redirect).await?;
    let mut scopes: Vec<String> = match &t.configured.scope {
        Some(s) => s.split_ascii_whitespace().map(str::to_owned).collect(),
        None => found.scopes.clone(),
    };
    if let Some(w) = existing.as_ref().and_then(|r| r.wanted_scope.as_deref()) {
        scopes.extend(w.split_ascii_whitespace().map(str::to_owned));
    }
    let offline = found
        .server
        .scopes_supported
        .iter()
        .any(|s| s == "offline_access");
    if offline {
        scopes.push("offline_access".into());
    }
    scopes.sort();
    scopes.dedup();

    let oauth = BasicClient::new(ClientId::new(client.id.clone()))
        .set_auth_uri(
            AuthUrl::new(found.server.authorization_endpoint.clone()).map_err(|e| e.to_string())?,
        )
        .set_token_uri(
            TokenUrl::new(found.server.token_endpoint.clone()).map_err(|e| e.to_string())?,
        )
        .set_redirect_uri(RedirectUrl::new(redirect.clone()).map_err(|e| e.to_string())?);
    let oauth = match &client.secret {
        Some(s) => oauth.set_client_secret(ClientSecret::new(s.clone())),
        None => oauth.set_auth_type(AuthType::RequestBody),
    };
    let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = oauth
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes.iter().cloned().map(Scope::new))
        .set_pkce_challenge(pkce)
        .add_extra_param("resource", found.resource.clone());
    if offline {
        // OpenID-style servers grant offline_access only with consent asked.
        request = request.add_extra_param("prompt", "consent");
    }
    let (url, state) = request.url();

    let _ = writeln!(
        out,
        "To authorize Corral for server '{}' ({}), open this address in a browser:\n\n  {url}\n",
        t.name, t.url
    );
    if let Some(to) = opts.url_to.take() {
        let _ = to.send(url.to_string());
    }
    let opened = opts.open_browser && open_browser(url.as_str());
    let _ = writeln!(
        out,
        "{}Waiting for the answer on {redirect}. If the browser cannot reach this machine \
         (over SSH), paste here the address it ends on.",
        if opened { "A browser was opened. " } else { "" }
    );
    let _ = out.flush();

    let (tx, mut rx) = mpsc::unbounded_channel::<Url>();
    let server = tokio::spawn(serve_callback(listener, state.secret().clone(), tx.clone()));
    if opts.paste {
        read_pasted(tx);
    } else {
        drop(tx);
    }
    let deadline = tokio::time::sleep(opts.timeout);
    tokio::pin!(deadline);
    let answer = loop {
        tokio::select! {
            u = rx.recv() => match u {
                Some(u) => {
                    let c = Callback::of(&u);
                    if c.state.as_deref() != Some(state.secret().as_str()) {
                        let _ = writeln!(out, "That address is not this authorization's answer (its state differs); still waiting.");
                        continue;
                    }
                    break c;
                }
                None => return Err("no answer arrived".into()),
            },
            () = &mut deadline => {
                server.abort();
                return Err(format!(
                    "no answer within {} s; run `corral auth {}` again",
                    opts.timeout.as_secs(),
                    t.name
                ));
            }
        }
    };
    server.abort();
    // RFC 9207: the answer names the issuer it came from; another one is a mix-up.
    match &answer.iss {
        Some(iss) if *iss != issuer => {
            return Err(format!(
                "the answer came from issuer {iss:?}, not {issuer:?} (a mix-up attack, or a \
                 misconfigured server): refused"
            ));
        }
        None if found.server.authorization_response_iss_parameter_supported => {
            return Err(format!(
                "the answer does not name its issuer although {issuer} says it always does: \
                 refused"
            ));
        }
        _ => {}
    }
    if let Some(e) = &answer.error {
        return Err(format!(
            "the authorization server said {e}{}",
            answer
                .error_description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ));
    }
    let Some(code) = answer.code else {
        return Err("the answer carries neither a code nor an error".into());
    };
    let resp = oauth
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", found.resource.clone())
        .request_async(&net::for_oauth2)
        .await
        .map_err(|e| match super::classify(e) {
            super::Refused::Rejected(w) | super::Refused::Transient(w) => w,
        })?;
    let asked = scopes.join(" ");
    let tokens = super::tokens_of(&resp, None, Some(&asked));

    let _lock = store.lock().map_err(|e| e.to_string())?;
    let generation = store.load().ok().flatten().map_or(0, |r| r.generation);
    let record = Record {
        project: t.project.to_string_lossy().into_owned(),
        server: t.name.clone(),
        url: t.url.clone(),
        resource: found.resource.clone(),
        issuer: issuer.clone(),
        token_endpoint: found.server.token_endpoint.clone(),
        revocation_endpoint: found.server.revocation_endpoint.clone(),
        client,
        tokens: Some(tokens.clone()),
        wanted_scope: None,
        generation: generation + 1,
    };
    store.save(&record).map_err(|e| {
        format!(
            "cannot save the credentials to {}: {e}",
            store.path().display()
        )
    })?;
    Ok(format!(
        "authorized server '{}' at {issuer} (scope: {}{}); the credentials are in {}",
        t.name,
        tokens.scope.as_deref().unwrap_or("none named"),
        if tokens.refresh.is_some() {
            ", refreshable"
        } else {
            ""
        },
        store.path().display()
    ))
}

/// The server's challenge to a request without credentials.
async fn ask_for_challenge(t: &Target) -> Result<Bearer, String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "corral-auth", "version": env!("CARGO_PKG_VERSION")}}
    });
    let uri: hyper::Uri = t
        .url
        .parse()
        .map_err(|_| format!("the url {:?} is not valid", t.url))?;
    let http = crate::http::Http::new(&uri)?;
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in &t.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let resp = http
        .send(req)
        .await
        .map_err(|e| format!("cannot reach {}: {e}", t.url))?;
    let status = resp.status().as_u16();
    if status != 401 {
        return Err(if (200..300).contains(&status) {
            format!(
                "{} answered without asking for authorization: nothing to do",
                t.url
            )
        } else {
            format!(
                "{} answered HTTP {status}, not 401 with an OAuth challenge: nothing to authorize",
                t.url
            )
        });
    }
    let values = resp
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok());
    challenge::bearer(values).map_err(|schemes| {
        format!(
            "{} asks for credentials, but not with OAuth (it offers {}): set them in the \
             server's `headers` instead",
            t.url,
            if schemes.is_empty() {
                "no scheme".to_owned()
            } else {
                schemes.join(", ")
            }
        )
    })
}

/// The client to authorize as: the configured one, the one registered before with this
/// issuer, else one registered now (RFC 7591).
async fn client_for(
    t: &Target,
    found: &Found,
    existing: Option<&Record>,
    redirect: &str,
) -> Result<Client, String> {
    let issuer = &found.server.issuer;
    if let Some(id) = &t.configured.client_id {
        return Ok(Client {
            id: id.clone(),
            secret: t.configured.client_secret.clone(),
            source: "config".into(),
            issuer: issuer.clone(),
            redirect_uri: None,
        });
    }
    if let Some(c) = existing.map(|r| &r.client)
        && c.issuer == *issuer
        && c.source == "dcr"
        && !c.id.is_empty()
    {
        return Ok(c.clone());
    }
    let Some(endpoint) = &found.server.registration_endpoint else {
        return Err(format!(
            "the authorization server {issuer} does not register clients: set `client_id` \
             (and `client_secret` if it gave you one) under [servers.{}.oauth]",
            t.name
        ));
    };
    let body = serde_json::json!({
        "client_name": "Corral",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    let a = net::send(
        Method::POST,
        endpoint,
        &[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ],
        body.to_string().into_bytes(),
    )
    .await?;
    #[derive(serde::Deserialize)]
    struct Registered {
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
    }
    if !a.ok() {
        return Err(format!(
            "registering Corral at {endpoint} failed: HTTP {}: {}",
            a.status,
            crate::quote(&a.body)
        ));
    }
    let r: Registered = serde_json::from_slice(&a.body)
        .map_err(|e| format!("the registration answer of {endpoint} is not a client: {e}"))?;
    Ok(Client {
        id: r.client_id,
        secret: r.client_secret,
        source: "dcr".into(),
        issuer: issuer.clone(),
        redirect_uri: Some(redirect.to_owned()),
    })
}

/// Opens `url` in `$BROWSER` or the desktop's opener; `false` when there is none (no
/// display, or a session over SSH).
/// Opens `url` (or a file's path) in the user's browser: `$BROWSER`, else the desktop's
/// opener; `false` when there is none (no display, an SSH session without one).
pub fn open_browser(url: &str) -> bool {
    let command = match std::env::var("BROWSER") {
        Ok(b) if !b.trim().is_empty() => b,
        _ => {
            let display = std::env::var_os("DISPLAY").is_some()
                || std::env::var_os("WAYLAND_DISPLAY").is_some();
            if std::env::var_os("SSH_CONNECTION").is_some() && !display {
                return false;
            }
            if cfg!(target_os = "macos") {
                "open".to_owned()
            } else if display {
                "xdg-open".to_owned()
            } else {
                return false;
            }
        }
    };
    let mut parts = command.split_ascii_whitespace();
    let Some(program) = parts.next() else {
        return false;
    };
    std::process::Command::new(program)
        .args(parts)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

/// Serves the loopback redirect: the answer with this flow's `state` goes to `tx`;
/// anything else is refused.
async fn serve_callback(
    listener: tokio::net::TcpListener,
    state: String,
    tx: mpsc::UnboundedSender<Url>,
) {
    use hyper::service::service_fn;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (state, tx) = (state.clone(), tx.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (state, tx) = (state.clone(), tx.clone());
                async move {
                    let url = Url::parse(&format!("http://127.0.0.1{}", req.uri())).ok();
                    let ours = req.method() == Method::GET
                        && req.uri().path() == "/callback"
                        && url.as_ref().is_some_and(|u| {
                            Callback::of(u).state.as_deref() == Some(state.as_str())
                        });
                    let (status, text) = if ours {
                        let _ = tx.send(url.expect("checked above"));
                        (
                            200,
                            "Corral received the answer. You can close this tab and return to the terminal.",
                        )
                    } else {
                        (404, "Not Corral's authorization answer.")
                    };
                    Ok::<_, std::convert::Infallible>(
                        Response::builder()
                            .status(status)
                            .header("content-type", "text/plain; charset=utf-8")
                            .header("cache-control", "no-store")
                            .header("referrer-policy", "no-referrer")
                            .body(Full::new(Bytes::from_static(text.as_bytes())))
                            .expect("a valid response"),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Reads addresses pasted into the terminal (over SSH, the browser's last address).
fn read_pasted(tx: mpsc::UnboundedSender<Url>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        loop {
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if let Ok(u) = Url::parse(line.trim())
                        && tx.send(u).is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
}

/// Revokes (where the authorization server offers it) and forgets the server's tokens;
/// the client registration stays, for the next `corral auth`.
pub async fn logout(t: &Target) -> Result<String, String> {
    let store = t.store()?;
    let _lock = store.lock().map_err(|e| e.to_string())?;
    let Some(mut record) = store.load().map_err(|e| e.to_string())? else {
        return Ok(format!("server '{}' holds no credentials", t.name));
    };
    let Some(tokens) = record.tokens.take() else {
        return Ok(format!("server '{}' holds no credentials", t.name));
    };
    let mut said = Vec::new();
    if let Some(endpoint) = &record.revocation_endpoint {
        // The refresh token first: revoking it ends the whole grant.
        let tokens = [
            ("refresh_token", tokens.refresh.as_deref()),
            ("access_token", Some(tokens.access.as_str())),
        ];
        for (hint, token) in tokens {
            let Some(token) = token else { continue };
            let what = hint.replace('_', " ");
            match revoke(&record, endpoint, hint, token).await {
                Ok(()) => said.push(format!("revoked the {what}")),
                Err(e) => said.push(format!("could not revoke the {what} ({e})")),
            }
        }
    } else {
        said.push("the authorization server offers no revocation".into());
    }
    record.generation += 1;
    record.wanted_scope = None;
    store.save(&record).map_err(|e| e.to_string())?;
    Ok(format!(
        "forgot the credentials of server '{}' ({}); the next use needs `corral auth {}`",
        t.name,
        said.join(", "),
        t.name
    ))
}

/// RFC 7009 revocation of `token` (by hand: the `oauth2` crate's refuses the plain-HTTP
/// loopback endpoints [`net::allowed`] permits for local servers).
async fn revoke(record: &Record, endpoint: &str, hint: &str, token: &str) -> Result<(), String> {
    let mut form = oauth2::url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("token", token)
        .append_pair("token_type_hint", hint);
    let basic;
    let mut headers = vec![("content-type", "application/x-www-form-urlencoded")];
    match &record.client.secret {
        Some(secret) => {
            let enc = |s: &str| {
                oauth2::url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
            };
            basic = format!(
                "Basic {}",
                crate::base64(format!("{}:{}", enc(&record.client.id), enc(secret)).as_bytes())
            );
            headers.push(("authorization", basic.as_str()));
        }
        None => {
            form.append_pair("client_id", &record.client.id);
        }
    }
    let a = net::send(Method::POST, endpoint, &headers, form.finish().into_bytes()).await?;
    if a.ok() {
        Ok(())
    } else {
        Err(format!("HTTP {}: {}", a.status, crate::quote(&a.body)))
    }
}

/// Whether the store holds tokens for `t` (for `ps` and the like: never the tokens).
pub fn has_tokens(t: &Target) -> bool {
    t.store()
        .ok()
        .and_then(|s| s.load().ok().flatten())
        .is_some_and(|r| r.tokens.is_some())
}

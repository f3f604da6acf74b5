//! `mcp` and `mcp_handoff`: a control connection that becomes an agent's MCP session.

use super::State;
use crate::protocol::Reply;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Serves MCP on this connection: the bridge relays the agent's bytes (its stdio is a
/// terminal, or an older bridge). A profile the daemon does not know gets the refusal
/// line instead (the bridge checked the config, so only a reload in between does that).
pub(crate) async fn mcp(
    state: &State,
    profile: Option<String>,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
    if let Err(refusal) = known_profile(state, profile.as_deref()) {
        let _ = write.write_all(refusal.line().as_bytes()).await;
        return;
    }
    corral_gateway::stdio::serve(state.hub.clone(), profile.as_deref(), reader, write).await;
}

/// `Err`: the refusal of a profile that is not configured, naming those that are.
fn known_profile(state: &State, profile: Option<&str>) -> Result<(), Reply> {
    match profile {
        Some(p) if state.hub.profile(p).is_none() => {
            let names = state.hub.profile_names();
            let list = if names.is_empty() {
                "none is configured ([profiles.NAME] in corral.toml)".to_owned()
            } else {
                format!("profiles: {}", names.join(", "))
            };
            Err(Reply::err(format!(
                "no profile '{p}' in the daemon's config; {list}"
            )))
        }
        _ => Ok(()),
    }
}

/// Serves MCP on the agent's own pipes, handed over by the bridge: no byte goes through
/// the bridge. The session ends when the agent closes its pipes (then the bridge is told
/// and exits) or when the bridge goes away (then the session is dropped: calls in flight
/// are cancelled on the servers).
pub(crate) async fn handoff(
    state: &State,
    profile: Option<String>,
    mut reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
    if let Err(refusal) = known_profile(state, profile.as_deref()) {
        let _ = write.write_all(refusal.line().as_bytes()).await;
        return;
    }
    if write
        .write_all(Reply::ok(Value::Null).line().as_bytes())
        .await
        .is_err()
    {
        return;
    }
    let sock: &UnixStream = reader.get_ref().as_ref();
    let fds = loop {
        if sock.readable().await.is_err() {
            return;
        }
        match sock.try_io(tokio::io::Interest::READABLE, || {
            crate::fdpass::recv_fds(sock, 2)
        }) {
            Ok(fds) => break fds,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    };
    let mut fds = fds.into_iter();
    let io = match (fds.next(), fds.next()) {
        (Some(i), Some(o)) => corral_gateway::fdio::reader(i).zip(corral_gateway::fdio::writer(o)),
        _ => None,
    };
    let Some((input, output)) = io else {
        let _ = write
            .write_all(
                Reply::err("expected two pipe or socket descriptors")
                    .line()
                    .as_bytes(),
            )
            .await;
        return;
    };
    let mut probe = [0u8; 1];
    tokio::select! {
        _ = corral_gateway::stdio::serve(state.hub.clone(), profile.as_deref(), input, output) => {
            let _ = write.write_all(Reply::ok(Value::Null).line().as_bytes()).await;
        }
        // The bridge never writes after the handoff: a read returns only when it is gone.
        _ = tokio::io::AsyncReadExt::read(&mut reader, &mut probe) => {}
    }
}

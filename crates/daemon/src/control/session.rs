//! `mcp` and `mcp_handoff`: a control connection that becomes an agent's MCP session.

use super::State;
use crate::protocol::Reply;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Serves MCP on this connection: the bridge relays the agent's bytes (its stdio is a
/// terminal, or an older bridge).
pub(crate) async fn mcp(state: &State, reader: BufReader<OwnedReadHalf>, write: OwnedWriteHalf) {
    corral_gateway::stdio::serve(state.hub.clone(), reader, write).await;
}

/// Serves MCP on the agent's own pipes, handed over by the bridge: no byte goes through
/// the bridge. The session ends when the agent closes its pipes (then the bridge is told
/// and exits) or when the bridge goes away (then the session is dropped: calls in flight
/// are cancelled on the servers).
pub(crate) async fn handoff(
    state: &State,
    mut reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
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
        _ = corral_gateway::stdio::serve(state.hub.clone(), input, output) => {
            let _ = write.write_all(Reply::ok(Value::Null).line().as_bytes()).await;
        }
        // The bridge never writes after the handoff: a read returns only when it is gone.
        _ = tokio::io::AsyncReadExt::read(&mut reader, &mut probe) => {}
    }
}

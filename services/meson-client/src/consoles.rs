//! Consoles: a VM's screen over VNC through meson, and a local bridge that
//! lets any VNC client (which speaks TCP) use a console's WebSocket.

use super::*;
use meson_types::console::{Console, ConsoleList, ConsoleRequestResponse, ConsoleResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

impl Client {
    /// `POST /v1/vms/{id}/actions/request-console`: a console (`requested`),
    /// its one-time WebSocket URL and its VNC password, good for a minute.
    pub async fn vm_request_console(&self, vm: Uuid) -> Result<ConsoleRequestResponse> {
        self.call(
            Method::POST,
            &format!("/v1/vms/{vm}/actions/request-console"),
            Some(&serde_json::json!({})),
        )
        .await
    }

    /// The tenant's newest consoles (at most `limit`, up to 100), of VM `vm`
    /// and with one of `status` when given.
    pub async fn console_list(
        &self,
        vm: Option<Uuid>,
        status: &[String],
        limit: Option<u32>,
    ) -> Result<Vec<Console>> {
        let mut q: Vec<(&str, String)> = Vec::new();
        if let Some(vm) = vm {
            q.push(("vm", vm.to_string()));
        }
        if !status.is_empty() {
            q.push(("status", status.join(",")));
        }
        if let Some(limit) = limit {
            q.push(("limit", limit.to_string()));
        }
        let query = serde_urlencoded::to_string(&q).map_err(|e| Error::Config(e.to_string()))?;
        let path = if query.is_empty() {
            "/v1/consoles".to_owned()
        } else {
            format!("/v1/consoles?{query}")
        };
        let r: ConsoleList = self.get(&path).await?;
        Ok(r.consoles)
    }

    pub async fn console_get(&self, id: Uuid) -> Result<Console> {
        let r: ConsoleResponse = self.get(&format!("/v1/consoles/{id}")).await?;
        Ok(r.console)
    }

    /// Ends a console: revoked if unused, its session closed if open.
    pub async fn console_delete(&self, id: Uuid) -> Result<Console> {
        let r: ConsoleResponse = self
            .call(Method::DELETE, &format!("/v1/consoles/{id}"), None::<&()>)
            .await?;
        Ok(r.console)
    }
}

/// Relays the first TCP connection `listener` accepts (a VNC viewer's) to
/// the console WebSocket `url` (a `wss_url`), byte for byte, until either
/// side closes; the viewer then answers the console's VNC password itself.
/// A console serves one connection, so one is bridged. The WebSocket is
/// dialled once the viewer connects: the URL's minute runs until then.
pub async fn console_bridge(listener: tokio::net::TcpListener, url: &str) -> Result<()> {
    let (tcp, _) = listener
        .accept()
        .await
        .map_err(|e| Error::Decode(format!("accepting the VNC viewer's connection: {e}")))?;
    drop(listener);
    bridge_stream(tcp, url).await
}

/// [`console_bridge`] of one connection already accepted.
pub async fn bridge_stream(tcp: tokio::net::TcpStream, url: &str) -> Result<()> {
    let mut req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .map_err(|e| Error::Config(format!("console URL {url}: {e}")))?;
    req.headers_mut().insert(
        "sec-websocket-protocol",
        reqwest::header::HeaderValue::from_static("binary"),
    );
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| match e {
            // meson's refusal, in its error envelope.
            tokio_tungstenite::tungstenite::Error::Http(res) => {
                let body = res.body().as_deref().unwrap_or_default();
                let (code, message) = match serde_json::from_slice::<wire::ErrorResponse>(body) {
                    Ok(e) => (e.error.code, e.error.message),
                    Err(_) => (String::new(), String::from_utf8_lossy(body).into_owned()),
                };
                Error::Api {
                    status: res.status().as_u16(),
                    code,
                    message,
                    details: Box::default(),
                    correlation_id: None,
                }
            }
            other => Error::Decode(format!("connecting to the console: {other}")),
        })?;
    let (mut sink, mut stream) = futures::StreamExt::split(ws);
    let (mut tcp_in, mut tcp_out) = tcp.into_split();
    let up = async {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = tcp_in.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                let _ = futures::SinkExt::close(&mut sink).await;
                return;
            }
            let msg = Message::Binary(buf[..n].to_vec().into());
            if futures::SinkExt::send(&mut sink, msg).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        while let Some(Ok(msg)) = futures::StreamExt::next(&mut stream).await {
            let written = match msg {
                Message::Binary(b) => tcp_out.write_all(&b).await.is_ok(),
                Message::Close(_) => false,
                _ => true,
            };
            if !written {
                break;
            }
        }
        let _ = tcp_out.shutdown().await;
    };
    // Either direction ending ends the bridge.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    Ok(())
}

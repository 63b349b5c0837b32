//! The RFB (VNC) handshake on both legs of a console (RFC 6143 §7.1–7.2):
//! meson is the server of the client's leg, where it asks for the
//! console's password (VNC authentication), and the client of the host's
//! leg, whose console asks for none. After both, the two legs carry the
//! same protocol (ClientInit onwards) and are relayed byte for byte.
//!
//! Each leg is a WebSocket whose binary messages carry the RFB byte
//! stream, split anywhere: [`Leg`] reads it as a stream.

use des::Des;
use des::cipher::{BlockEncrypt, KeyInit, generic_array::GenericArray};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Security types (RFC 6143 §7.2).
const SECURITY_NONE: u8 = 1;
const SECURITY_VNC: u8 = 2;
/// The longest reason string read from a host.
const MAX_REASON: usize = 4096;

/// Why a handshake ended without a session.
#[derive(Debug, thiserror::Error)]
pub enum RfbError {
    /// The other side closed, or its WebSocket failed.
    #[error("the connection ended: {0}")]
    Closed(String),
    /// It broke the protocol.
    #[error("{0}")]
    Protocol(String),
    /// The client's answer to the challenge is not the password's.
    #[error("wrong password")]
    WrongPassword,
}

/// One leg of a console: a WebSocket read as a byte stream.
pub struct Leg<S> {
    pub ws: WebSocketStream<S>,
    /// Bytes received and not read yet.
    pub pending: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Leg<S> {
    pub fn new(ws: WebSocketStream<S>) -> Self {
        Leg {
            ws,
            pending: Vec::new(),
        }
    }

    /// The next `n` bytes of the stream.
    pub async fn read_exact(&mut self, n: usize) -> Result<Vec<u8>, RfbError> {
        while self.pending.len() < n {
            match self.ws.next().await {
                Some(Ok(Message::Binary(b))) => self.pending.extend_from_slice(&b),
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Text(_))) => {
                    return Err(RfbError::Protocol(
                        "text messages carry no RFB: send binary messages".into(),
                    ));
                }
                Some(Ok(Message::Close(_))) | None => {
                    return Err(RfbError::Closed("closed by the other side".into()));
                }
                Some(Err(e)) => return Err(RfbError::Closed(e.to_string())),
            }
        }
        let rest = self.pending.split_off(n);
        Ok(std::mem::replace(&mut self.pending, rest))
    }

    async fn read_u32(&mut self) -> Result<u32, RfbError> {
        let b = self.read_exact(4).await?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A reason string (`u32` length, then the text).
    async fn read_reason(&mut self) -> Result<String, RfbError> {
        let len = self.read_u32().await? as usize;
        let text = self.read_exact(len.min(MAX_REASON)).await?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    pub async fn write(&mut self, bytes: Vec<u8>) -> Result<(), RfbError> {
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .map_err(|e| RfbError::Closed(e.to_string()))
    }
}

/// The minor version of a `RFB 003.00x\n` greeting: 3, 7 or 8, as a
/// server reads a client's (§7.1.1: 3.4–3.6 and unknown ones are 3.3;
/// later ones, Apple's 3.889 among them, are 3.8).
pub fn minor_version(raw: &[u8]) -> Result<u8, RfbError> {
    let text = std::str::from_utf8(raw).unwrap_or_default();
    let parsed = text
        .strip_prefix("RFB ")
        .and_then(|t| t.strip_suffix('\n'))
        .and_then(|t| t.split_once('.'))
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)));
    match parsed {
        Some((3, minor)) if minor >= 8 => Ok(8),
        Some((3, 7)) => Ok(7),
        Some((3, _)) => Ok(3),
        Some((major, _)) if major > 3 => Ok(8),
        _ => Err(RfbError::Protocol(format!(
            "not an RFB protocol version: {:?}",
            String::from_utf8_lossy(raw)
        ))),
    }
}

fn greeting(minor: u8) -> Vec<u8> {
    format!("RFB 003.00{minor}\n").into_bytes()
}

/// `challenge` encrypted with `password` as VNC authentication does
/// (§7.2.2): DES, the password's first eight bytes (zero-padded) as the
/// key with each byte's bits in reverse order.
pub fn vnc_response(password: &str, challenge: &[u8; 16]) -> [u8; 16] {
    let mut key = [0u8; 8];
    for (k, b) in key.iter_mut().zip(password.bytes()) {
        *k = b.reverse_bits();
    }
    let cipher = Des::new(GenericArray::from_slice(&key));
    let mut out = *challenge;
    for block in out.chunks_exact_mut(8) {
        cipher.encrypt_block(GenericArray::from_mut_slice(block));
    }
    out
}

/// The server's side of the client's leg up to its security result: the
/// client must answer VNC authentication with `password`. Answers the
/// client's protocol version; on `Ok`, [`accept`] or [`refuse`] must follow.
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Leg<S>,
    password: &str,
) -> Result<u8, RfbError> {
    client.write(greeting(8)).await?;
    let minor = minor_version(&client.read_exact(12).await?)?;
    if minor == 3 {
        // 3.3: the server picks the type.
        client
            .write(u32::from(SECURITY_VNC).to_be_bytes().to_vec())
            .await?;
    } else {
        client.write(vec![1, SECURITY_VNC]).await?;
        let chosen = client.read_exact(1).await?[0];
        if chosen != SECURITY_VNC {
            let why = format!("security type {chosen} was not offered: only VNC authentication");
            refuse(client, minor, &why).await;
            return Err(RfbError::Protocol(why));
        }
    }
    let challenge: [u8; 16] = rand::random();
    client.write(challenge.to_vec()).await?;
    let answer = client.read_exact(16).await?;
    let expected = vnc_response(password, &challenge);
    if subtle::ConstantTimeEq::ct_eq(answer.as_slice(), expected.as_slice()).into() {
        Ok(minor)
    } else {
        refuse(client, minor, "wrong password").await;
        Err(RfbError::WrongPassword)
    }
}

/// Tells an authenticated client its security handshake succeeded.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Leg<S>,
) -> Result<(), RfbError> {
    client.write(0u32.to_be_bytes().to_vec()).await
}

/// Tells the client its security handshake failed, with `why` where its
/// version has room for a reason (3.8). Best effort: it may be gone.
pub async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(client: &mut Leg<S>, minor: u8, why: &str) {
    let mut out = 1u32.to_be_bytes().to_vec();
    if minor >= 8 {
        out.extend_from_slice(&(why.len() as u32).to_be_bytes());
        out.extend_from_slice(why.as_bytes());
    }
    let _ = client.write(out).await;
}

/// The client's side of the host's leg, through its security handshake,
/// which must need none (the host's console trusts whoever reaches it).
pub async fn attach<S: AsyncRead + AsyncWrite + Unpin>(host: &mut Leg<S>) -> Result<(), RfbError> {
    let minor = minor_version(&host.read_exact(12).await?)?;
    host.write(greeting(minor)).await?;
    if minor == 3 {
        match host.read_u32().await? {
            0 => return Err(RfbError::Protocol(host.read_reason().await?)),
            t if t == u32::from(SECURITY_NONE) => return Ok(()),
            t => {
                return Err(RfbError::Protocol(format!(
                    "the host's console asks for security type {t}, not none"
                )));
            }
        }
    }
    let count = host.read_exact(1).await?[0];
    if count == 0 {
        return Err(RfbError::Protocol(host.read_reason().await?));
    }
    let types = host.read_exact(usize::from(count)).await?;
    if !types.contains(&SECURITY_NONE) {
        return Err(RfbError::Protocol(format!(
            "the host's console offers security types {types:?}, not none"
        )));
    }
    host.write(vec![SECURITY_NONE]).await?;
    if minor >= 8 {
        match host.read_u32().await? {
            0 => {}
            _ => return Err(RfbError::Protocol(host.read_reason().await?)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_a_server_reads_them() {
        for (raw, minor) in [
            (&b"RFB 003.008\n"[..], 8),
            (b"RFB 003.007\n", 7),
            (b"RFB 003.003\n", 3),
            (b"RFB 003.005\n", 3),
            (b"RFB 003.889\n", 8),
            (b"RFB 004.001\n", 8),
        ] {
            assert_eq!(minor_version(raw).unwrap(), minor, "{raw:?}");
        }
        assert!(minor_version(b"GET / HTTP/1").is_err());
    }

    #[test]
    fn the_vnc_response_is_des_with_mirrored_key_bits() {
        // Reference: OpenSSL's DES-ECB of a zero block under the key
        // 0e86ceceeef64e26 ("password", each byte's bits mirrored).
        let zero = [0u8; 16];
        let r = vnc_response("password", &zero);
        let block = [0xff, 0x97, 0x50, 0x2e, 0x94, 0x22, 0xf0, 0x89];
        assert_eq!((&r[..8], &r[8..]), (&block[..], &block[..]));
        // Only the first eight characters count; fewer are zero-padded.
        assert_eq!(
            vnc_response("password", &zero),
            vnc_response("password123", &zero)
        );
        assert_ne!(
            vnc_response("pass", &zero),
            vnc_response("pass\0\0\0x", &zero)
        );
        assert_eq!(
            vnc_response("pass", &zero),
            vnc_response("pass\0\0\0\0", &zero)
        );
    }
}

//! Secrets at rest: XChaCha20-Poly1305 under one 32-byte key from configuration.
//!
//! A sealed value is `version (1 byte) || nonce (24 bytes) || ciphertext+tag`.
//! The 24-byte nonce is random for every seal: XChaCha's nonce is long enough
//! that random nonces never collide in practice, so no counter has to be
//! stored. The associated data (`aad`) is authenticated but not stored: pass
//! what the secret belongs to (e.g. `b"cluster:<id>"`) so that a sealed value
//! copied onto another row does not open.

use crate::error::KaasError;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use rand::RngCore;
use rand::rngs::OsRng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use zeroize::{Zeroize, Zeroizing};

/// The format of what [`seal`] writes; [`open`] refuses any other.
pub const SEALED_VERSION: u8 = 1;
pub const KEY_LEN: usize = 32;
pub const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

/// The key that seals secrets at rest. Its `Debug` never shows it and its
/// bytes are zeroed when it is dropped.
#[derive(Clone)]
pub struct SecretKey([u8; KEY_LEN]);

impl SecretKey {
    /// Reads a key from configuration: 32 bytes in standard base64 (as
    /// `openssl rand -base64 32` prints), surrounding whitespace ignored.
    pub fn from_base64(s: &str) -> Result<SecretKey, KaasError> {
        let bytes = Zeroizing::new(STANDARD.decode(s.trim()).map_err(|_| {
            KaasError::InvalidKey(
                "not standard base64 (make one with `openssl rand -base64 32`)".into(),
            )
        })?);
        let key: [u8; KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
            KaasError::InvalidKey(format!(
                "{} bytes, expected {KEY_LEN} (make one with `openssl rand -base64 32`)",
                bytes.len()
            ))
        })?;
        Ok(SecretKey(key))
    }

    /// A fresh random key from the operating system's CSPRNG.
    pub fn generate() -> SecretKey {
        let mut key = [0u8; KEY_LEN];
        OsRng.fill_bytes(&mut key);
        SecretKey(key)
    }

    /// The key in the form [`SecretKey::from_base64`] reads.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(Key::from_slice(&self.0))
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey([redacted])")
    }
}

/// Encrypts and authenticates `plaintext`, binding it to `aad`.
pub fn seal(key: &SecretKey, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    OsRng.fill_bytes(&mut nonce);
    let ciphertext = key
        .cipher()
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        // Only messages of 256 GiB and more are refused.
        .expect("XChaCha20-Poly1305 seals any message this process can hold");
    let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
    out.push(SEALED_VERSION);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    out
}

/// Decrypts what [`seal`] wrote under the same key and `aad`. A wrong key,
/// a wrong `aad`, or any changed, missing or added byte is an error.
pub fn open(key: &SecretKey, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, KaasError> {
    let Some((&version, rest)) = sealed.split_first() else {
        return Err(KaasError::Open("empty"));
    };
    if version != SEALED_VERSION {
        return Err(KaasError::Open("unknown format version"));
    }
    if rest.len() < NONCE_LEN + TAG_LEN {
        return Err(KaasError::Open("truncated"));
    }
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    key.cipher()
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| KaasError::Open("wrong key or associated data, or tampered bytes"))
}

/// [`seal`]s `value` serialized as JSON. The JSON buffer is zeroed afterwards.
pub fn seal_json<T: Serialize>(
    key: &SecretKey,
    value: &T,
    aad: &[u8],
) -> Result<Vec<u8>, KaasError> {
    let json = Zeroizing::new(serde_json::to_vec(value).map_err(KaasError::Json)?);
    Ok(seal(key, &json, aad))
}

/// [`open`]s what [`seal_json`] wrote and deserializes it.
pub fn open_json<T: DeserializeOwned>(
    key: &SecretKey,
    sealed: &[u8],
    aad: &[u8],
) -> Result<T, KaasError> {
    let json = Zeroizing::new(open(key, sealed, aad)?);
    serde_json::from_slice(&json).map_err(KaasError::Json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens() {
        let key = SecretKey::generate();
        let sealed = seal(&key, b"hello", b"cluster:1");
        assert_eq!(sealed[0], SEALED_VERSION);
        assert_eq!(sealed.len(), 1 + NONCE_LEN + 5 + TAG_LEN);
        assert!(!sealed.windows(5).any(|w| w == b"hello"));
        assert_eq!(open(&key, &sealed, b"cluster:1").unwrap(), b"hello");
        // Empty plaintexts work too.
        assert_eq!(open(&key, &seal(&key, b"", b""), b"").unwrap(), b"");
    }

    #[test]
    fn every_seal_uses_a_new_nonce() {
        let key = SecretKey::generate();
        let a = seal(&key, b"same", b"");
        let b = seal(&key, b"same", b"");
        assert_ne!(a[1..1 + NONCE_LEN], b[1..1 + NONCE_LEN]);
        assert_ne!(a, b);
    }

    #[test]
    fn wrong_key_aad_or_bytes_fail_without_panicking() {
        let key = SecretKey::generate();
        let sealed = seal(&key, b"secret", b"cluster:1");
        assert!(open(&SecretKey::generate(), &sealed, b"cluster:1").is_err());
        assert!(open(&key, &sealed, b"cluster:2").is_err());
        for i in 0..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 0x01;
            assert!(open(&key, &t, b"cluster:1").is_err(), "flip at byte {i}");
        }
        for n in 0..sealed.len() {
            assert!(
                open(&key, &sealed[..n], b"cluster:1").is_err(),
                "cut at {n}"
            );
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert!(open(&key, &longer, b"cluster:1").is_err());
        let mut v2 = sealed;
        v2[0] = 2;
        assert!(matches!(
            open(&key, &v2, b"cluster:1"),
            Err(KaasError::Open("unknown format version"))
        ));
    }

    #[test]
    fn keys_come_from_base64_of_exactly_32_bytes() {
        let key = SecretKey::generate();
        let b64 = key.to_base64();
        let again = SecretKey::from_base64(&format!("  {b64}\n")).unwrap();
        let sealed = seal(&key, b"x", b"");
        assert_eq!(open(&again, &sealed, b"").unwrap(), b"x");

        for bad in [
            "",
            "not base64!",
            &STANDARD.encode([0u8; 16]),
            &STANDARD.encode([0u8; 33]),
        ] {
            let err = SecretKey::from_base64(bad).unwrap_err();
            assert!(matches!(err, KaasError::InvalidKey(_)), "{bad}: {err}");
        }
        let err = SecretKey::from_base64(&STANDARD.encode([7u8; 31])).unwrap_err();
        assert!(err.to_string().contains("31 bytes"), "{err}");
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = SecretKey::from_base64(&STANDARD.encode([0xabu8; 32])).unwrap();
        assert_eq!(format!("{key:?}"), "SecretKey([redacted])");
        assert_eq!(format!("{:?}", Some(key)), "Some(SecretKey([redacted]))");
    }

    #[test]
    fn json_round_trip() {
        let key = SecretKey::generate();
        let sealed = seal_json(&key, &vec!["a", "b"], b"t").unwrap();
        let v: Vec<String> = open_json(&key, &sealed, b"t").unwrap();
        assert_eq!(v, ["a", "b"]);
        assert!(open_json::<Vec<String>>(&key, &sealed, b"u").is_err());
    }
}

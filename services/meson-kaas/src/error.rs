//! The crate's one error type.

/// What can go wrong in meson-kaas. Messages never contain secret material.
#[derive(Debug, thiserror::Error)]
pub enum KaasError {
    /// The secrets key from configuration is unusable.
    #[error("invalid secret key: {0}")]
    InvalidKey(String),
    /// Sealed bytes could not be opened: wrong key, wrong associated data,
    /// tampered or truncated bytes, or an unknown format version.
    #[error("sealed secret cannot be opened: {0}")]
    Open(&'static str),
    /// Stored secrets could not be (de)serialized.
    #[error("secrets are not valid JSON")]
    Json(#[source] serde_json::Error),
    /// rcgen refused to build a key or certificate.
    #[error("certificate or key generation failed")]
    Certificate(#[source] rcgen::Error),
    /// A stored certificate or key could not be read back.
    #[error("stored {0} cannot be parsed")]
    BadPem(&'static str),
    /// An input to a renderer is unusable; `field` names it.
    #[error("{field}: {message}")]
    InvalidInput { field: String, message: String },
}

impl KaasError {
    pub(crate) fn input(field: impl Into<String>, message: impl Into<String>) -> Self {
        KaasError::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<rcgen::Error> for KaasError {
    fn from(e: rcgen::Error) -> Self {
        KaasError::Certificate(e)
    }
}

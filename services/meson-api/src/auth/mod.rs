//! Bearer JWT authentication: who is calling, for which tenant, with which role.
//!
//! One algorithm is pinned by configuration (HS256 with a shared secret, or
//! RS256 / ES256 / EdDSA with a JWKS read from a file or a URL); a token that
//! names any other algorithm is refused before a key is even looked up, which
//! is what defeats `alg: none` and the HS256-with-the-public-key confusion.
//! Every refusal is the same `unauthorized` to the caller; the reason is
//! logged at info level (never the token).

mod config;
mod jwks;
mod principal;
pub mod testing;
#[cfg(test)]
mod tests;
mod verify;

pub use config::{AUDIENCE, AuthConfig, AuthConfigError, KeySource, MIN_SECRET_LEN};
pub use jwks::JwksError;
pub use principal::{Principal, Role};
pub use verify::{Auth, UNKNOWN_KID_REFETCH_INTERVAL};

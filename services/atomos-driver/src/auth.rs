//! Auth daemon: log the daemons in and read their session status.

use crate::client::{AtomosClient, Call, Daemon};
use crate::error::{DriverError, ErrorKind};
use crate::schema::auth::{AuthStatusResponse, LoginBody, LoginResponse};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStatus {
    pub authenticated: bool,
    pub username: Option<String>,
}

impl AtomosClient {
    /// Logs the daemons in; `Ok(false)` when the credentials are refused.
    pub async fn login(&self, username: &str, password: &str) -> Result<bool, DriverError> {
        // Logging in twice is harmless, so transient failures are retried.
        let call = Call::post(Daemon::Auth, "/login").safe();
        let body = LoginBody {
            username: username.to_owned(),
            password: password.to_owned(),
        };
        match self.send_json(&call, &body).await {
            Ok(reply) => Ok(reply.json::<LoginResponse>(&call.route)?.authenticated),
            // A refusal is an answer to this call, not a failure of it.
            Err(e) if e.kind == ErrorKind::Auth => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn auth_status(&self) -> Result<AuthStatus, DriverError> {
        let s: AuthStatusResponse = self.get_json(Daemon::Auth, "/status").await?;
        Ok(AuthStatus {
            authenticated: s.authenticated,
            username: s.username,
        })
    }
}

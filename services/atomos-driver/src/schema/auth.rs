//! Auth daemon JSON: login and session status.

use serde::{Deserialize, Serialize};

/// `POST /login` body (also the query of the GUI's `GET /login`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoginBody {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
}

/// `POST /login` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoginResponse {
    #[serde(default)]
    pub authenticated: bool,
}

/// `GET /status` answer; the newer mock adds organisation and limit fields,
/// which are not relied upon and so not modelled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuthStatusResponse {
    #[serde(default)]
    pub authenticated: bool,
    #[serde(default)]
    pub username: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_ignores_mock_extras() {
        let s: AuthStatusResponse = serde_json::from_value(json!({
            "authenticated": true, "username": "alice", "org_id": "o1", "role": "ORGOWNER",
            "limits": {"max_vms": 10}
        }))
        .unwrap();
        assert!(s.authenticated);
        assert_eq!(s.username.as_deref(), Some("alice"));
    }
}

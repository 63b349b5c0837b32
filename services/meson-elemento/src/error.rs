//! Errors in the daemons' shape: FastAPI's `{"detail": "..."}` with the
//! HTTP status meson chose. A bad field is named in `detail` (and listed in
//! `fields` for programs), under the name the daemon's client used.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed daemon call.
#[derive(Debug)]
pub struct Detail {
    pub status: StatusCode,
    pub detail: String,
    /// `[{name, messages}]`, the client's field names.
    pub fields: Vec<Value>,
}

pub type DResult<T> = Result<T, Detail>;

impl Detail {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Detail {
        Detail {
            status,
            detail: detail.into(),
            fields: Vec::new(),
        }
    }

    /// A bad field of the request, as the client named it.
    pub fn field(name: &str, message: impl Into<String>) -> Detail {
        let message = message.into();
        Detail {
            status: StatusCode::BAD_REQUEST,
            detail: format!("{name}: {message}"),
            fields: vec![json!({"name": name, "messages": [message]})],
        }
    }

    pub fn unauthenticated() -> Detail {
        Detail::new(StatusCode::UNAUTHORIZED, "Not authenticated")
    }

    /// A route of the daemons meson does not offer.
    pub fn not_supported() -> Detail {
        Detail::new(StatusCode::NOT_IMPLEMENTED, "not supported by meson")
    }

    /// meson's error, its field names mapped back by `rename` (a meson
    /// field path to the client's).
    pub fn from_meson(err: meson_client::Error, rename: &dyn Fn(&str) -> String) -> Detail {
        use meson_client::Error as E;
        match err {
            E::Api {
                status,
                code,
                message,
                details,
                ..
            } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                if status == StatusCode::UNAUTHORIZED {
                    return Detail::new(
                        status,
                        "Not authenticated: meson refused the session's token (log in again)",
                    );
                }
                let fields: Vec<Value> = details
                    .fields
                    .iter()
                    .flatten()
                    .map(|f| json!({"name": rename(&f.name), "messages": f.messages}))
                    .collect();
                let detail = if fields.is_empty() {
                    message
                } else {
                    let parts: Vec<String> = fields
                        .iter()
                        .map(|f| {
                            let msgs: Vec<&str> = f["messages"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(Value::as_str)
                                .collect();
                            if msgs.is_empty() {
                                f["name"].as_str().unwrap_or_default().to_owned()
                            } else {
                                format!(
                                    "{}: {}",
                                    f["name"].as_str().unwrap_or_default(),
                                    msgs.join(", ")
                                )
                            }
                        })
                        .collect();
                    match code.as_str() {
                        "invalid_input" => format!("invalid input: {}", parts.join("; ")),
                        _ => format!("{message} ({})", parts.join("; ")),
                    }
                };
                Detail {
                    status,
                    detail,
                    fields,
                }
            }
            E::Transport(e) => {
                Detail::new(StatusCode::BAD_GATEWAY, format!("cannot reach meson: {e}"))
            }
            E::Decode(e) => Detail::new(
                StatusCode::BAD_GATEWAY,
                format!("unexpected answer from meson: {e}"),
            ),
            other => Detail::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
        }
    }

    /// A translated body as meson's typed request. A field whose type does
    /// not fit (meson would refuse it too) is named by `rename` (a meson
    /// field path to the client's); meson checks the rest.
    pub fn typed<T: serde::de::DeserializeOwned>(
        body: Value,
        rename: &dyn Fn(&str) -> String,
    ) -> DResult<T> {
        meson_types::lenient::from_value(body).map_err(|e| {
            let name = if e.path.is_empty() {
                "body".to_owned()
            } else {
                rename(&e.path)
            };
            Detail::field(&name, e.message)
        })
    }

    /// meson's error with its field names as they are.
    pub fn meson(err: meson_client::Error) -> Detail {
        Detail::from_meson(err, &|s| s.to_owned())
    }
}

impl IntoResponse for Detail {
    fn into_response(self) -> Response {
        let mut body = json!({ "detail": self.detail });
        if !self.fields.is_empty() {
            body["fields"] = Value::Array(self.fields);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

//! Actions: the progress of asynchronous work, Hetzner style.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Asynchronous work on resources: its progress and, once finished, its outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Action {
    pub id: Uuid,
    /// e.g. `create_vm`, `delete_vm`.
    #[schema(example = "create_vm")]
    pub command: String,
    /// `running`, `success` or `error`.
    #[schema(value_type = ActionStatus)]
    pub status: String,
    /// 0 to 100.
    #[schema(maximum = 100)]
    pub progress: u8,
    pub started: DateTime<Utc>,
    /// When it finished; `null` while running.
    #[schema(required = true)]
    pub finished: Option<DateTime<Utc>>,
    /// The resources it works on.
    pub resources: Vec<ActionResource>,
    /// Why it failed; `null` unless its status is `error`.
    #[schema(required = true)]
    pub error: Option<ActionError>,
}

/// An action's status (documentation: the wire field is a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActionStatus {
    Running,
    Success,
    Error,
}

/// A resource an action works on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ActionResource {
    pub id: Uuid,
    /// The resource's type: `vm`, `volume`, ...
    #[serde(rename = "type")]
    #[schema(example = "vm")]
    pub kind: String,
}

/// Why an action failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ActionError {
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionResponse {
    pub action: Action,
    /// Unknown request fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<crate::Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionList {
    pub actions: Vec<Action>,
}

/// A page of a resource's actions (`GET /v1/vms/{id}/actions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionPage {
    pub actions: Vec<Action>,
    pub meta: crate::Meta,
}

/// One event of `GET /v1/actions/stream` (documentation): `action` events
/// carry an [`Action`] as JSON, an `error` event the error envelope and
/// ends the stream.
pub struct ActionStreamEvent;

impl utoipa::PartialSchema for ActionStreamEvent {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let event = |name: &str, data: &str, description: &str| {
            let mut json = ObjectBuilder::new()
                .schema_type(Type::String)
                .content_media_type("application/json")
                .description(Some(description));
            // JSON Schema's `contentSchema`, which utoipa's builder lacks.
            json = json.extensions(Some(
                [(
                    "contentSchema",
                    serde_json::json!({"$ref": format!("#/components/schemas/{data}")}),
                )]
                .into_iter()
                .collect(),
            ));
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property(
                    "event",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([name])),
                )
                .required("event")
                .property("data", json)
                .required("data")
        };
        OneOfBuilder::new()
            .item(event(
                "action",
                "Action",
                "The action as `GET /v1/actions/{id}` shows it.",
            ))
            .item(event(
                "error",
                "ErrorResponse",
                "Why the stream ends early: the error envelope.",
            ))
            .description(Some(
                "A Server-Sent Event: `event: action` with an `Action`, or `event: error` \
                 with the error envelope.",
            ))
            .into()
    }
}

impl ToSchema for ActionStreamEvent {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push((
            Action::name().into_owned(),
            <Action as utoipa::PartialSchema>::schema(),
        ));
        Action::schemas(schemas);
        schemas.push((
            crate::ErrorResponse::name().into_owned(),
            <crate::ErrorResponse as utoipa::PartialSchema>::schema(),
        ));
        crate::ErrorResponse::schemas(schemas);
    }
}

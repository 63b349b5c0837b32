//! The OpenAPI 3.1 document: `GET /openapi.json`, Swagger UI at `/docs`,
//! and the checked-in copy in `openapi/meson.json`.
//!
//! Each route is added with `routes!()` from its handler's
//! `#[utoipa::path]`, so the router and the document come from one place.
//! What every operation shares (the bearer token, `X-Correlation-Id`,
//! `Idempotency-Key` on POSTs, the 401/500/504 answers any request can get)
//! is added here once, by [`finish`].

use crate::auth::Role;
use crate::authz::{self, Access};
use axum::Router;
use meson_types::ErrorResponse;
use utoipa::ToSchema;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, RefOr, Required,
    Response, ResponseBuilder, Tag,
};
use utoipa_swagger_ui::SwaggerUi;

/// The security scheme every `/v1` operation requires.
pub const BEARER: &str = "bearer";

/// Regenerates `openapi/meson.json` when set to 1 (see the test below).
pub const WRITE_ENV: &str = "MESON_WRITE_OPENAPI";

/// The document's skeleton: info, tags, the security scheme, and the
/// components that only query parameters name (routes collect the others).
pub fn base() -> OpenApi {
    let tag = |name: &str, description: &str| {
        let mut t = Tag::new(name);
        t.description = Some(description.to_owned());
        t
    };
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("meson")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "meson, Elemento's control plane for virtual machines and managed \
                     Kubernetes.\n\n\
                     Every `/v1` request needs `Authorization: Bearer <JWT>`. Errors are \
                     `{\"error\": {\"code\", \"message\", \"details\"}}`; every response \
                     carries `X-Correlation-Id`. A POST with an `Idempotency-Key` header is \
                     done once: a retry with the same key and request replays the first \
                     answer. Mutations that touch AtomOS answer with an *action* to poll \
                     (`GET /v1/actions/{id}`) or stream (`GET /v1/actions/stream`).",
                ))
                .license(Some(utoipa::openapi::License::new("Apache-2.0")))
                .build(),
        )
        .tags(Some([
            tag("vms", "Virtual machines"),
            tag("actions", "Progress of asynchronous work"),
            tag("volumes", "Volumes meson created for VMs"),
            tag("images", "Boot disks to create VMs from"),
            tag(
                "backups",
                "Copies of VMs' volumes, taken on request or daily, and restores",
            ),
            tag(
                "consoles",
                "VMs' screens over VNC, relayed by meson to one-time WebSocket sessions",
            ),
            tag("catalog", "Flavours, providers and prices"),
            tag("ops", "Index, liveness, readiness and metrics"),
            tag("quotas", "What each tenant may hold"),
            tag(
                "members",
                "An organisation's members, invitations, and the caller's memberships",
            ),
            tag(
                "usage",
                "Metered usage, cost, monthly statements and the price list",
            ),
            tag("targets", "AtomOS hosts (operators)"),
            tag("audit", "Who did what (operators)"),
        ]))
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme(
                    BEARER,
                    SecurityScheme::Http(
                        HttpBuilder::new()
                            .scheme(HttpAuthScheme::Bearer)
                            .bearer_format("JWT")
                            .description(Some(
                                "A JWT signed with the algorithm the deployment pins (HS256, \
                                 RS256, ES256 or EdDSA; the key named by `kid` from its JWKS), \
                                 with `sub`, `tenant`, `roles` (an array: viewer, editor, \
                                 owner or admin), `iss`, `aud` = `meson` and `exp` (`nbf` \
                                 honoured). Viewers read, editors also change, owners (a \
                                 tenant's administrators) also read their tenant's audit log, \
                                 admins (Elemento's operators, across tenants) also manage \
                                 quotas, AtomOS targets and read every tenant's audit log.",
                            ))
                            .build(),
                    ),
                )
                .schema_from::<meson_types::vm::VmStatus>()
                .schema_from::<meson_types::action::ActionStatus>()
                .schema_from::<meson_types::volume::VolumeKind>()
                .schema_from::<meson_types::requests::VmSort>()
                .schema_from::<meson_types::requests::ActionSort>()
                .build(),
        ))
        .build()
}

/// Adds what every operation shares; see the module documentation. Who may
/// call an operation comes from its rule in `authz::rules()`.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, schema) in schemas_of::<ErrorResponse>() {
        components.schemas.entry(name).or_insert(schema);
    }
    for item in doc.paths.paths.values_mut() {
        let ops = [
            (HttpMethod::Get, &mut item.get),
            (HttpMethod::Post, &mut item.post),
            (HttpMethod::Put, &mut item.put),
            (HttpMethod::Patch, &mut item.patch),
            (HttpMethod::Delete, &mut item.delete),
        ];
        for (method, op) in ops {
            if let Some(op) = op {
                let rule = op.operation_id.as_deref().and_then(authz::rule_of);
                shared(method, rule, op);
            }
        }
    }
    doc
}

/// `T`'s schema and those it names, as `components.schemas` entries.
fn schemas_of<T: ToSchema>() -> Vec<(String, RefOr<utoipa::openapi::schema::Schema>)> {
    let mut out = vec![(T::name().into_owned(), T::schema())];
    T::schemas(&mut out);
    out
}

fn shared(method: HttpMethod, rule: Option<&authz::Rule>, op: &mut Operation) {
    let access = rule.map(|r| r.access);
    let authenticated = matches!(access, Some(Access::Role(_)));
    // From a browser, a state change (or a credential) only from meson's own
    // pages and the allowed origins.
    let first_party = method != HttpMethod::Get || rule.is_some_and(|r| r.first_party_only);
    let other_origins = "a page of another origin sent it (`Origin`, or \
        `Sec-Fetch-Site: cross-site`)";
    if let Some(Access::Role(role)) = access {
        op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
        error(op, 401, "No valid bearer token (`unauthorized`).");
        if role > Role::Viewer {
            let mut why = format!(
                "The token's role cannot do this (`forbidden`): it needs {}",
                role.as_str()
            );
            if first_party {
                why.push_str(&format!("; or {other_origins}"));
            }
            error(op, 403, &format!("{why}."));
        }
    }
    if first_party {
        error(op, 403, &format!("Refused (`forbidden`): {other_origins}."));
    }
    error(
        op,
        421,
        "The `Host` header names a server this is not (`forbidden`): meson answers to \
         localhost, its addresses and the names configured for it (`MESON_ALLOWED_HOSTS`).",
    );
    if let Some(Access::Role(_)) = access {
        let limited = error_response(
            "Too many requests from this tenant (`rate_limit_exceeded`): retry after \
             `Retry-After` seconds.",
        );
        op.responses
            .responses
            .entry("429".to_owned())
            .or_insert_with(|| limited.into());
    } else {
        op.security = Some(vec![SecurityRequirement::default()]);
    }
    error(
        op,
        431,
        "The request's headers are too large (`invalid_input` on `(headers)`).",
    );
    if op.request_body.is_some() {
        error(
            op,
            413,
            "The body is larger than the API accepts (`payload_too_large`, 1 MiB by default).",
        );
        error(
            op,
            415,
            "The body is not sent as `application/json` (`unsupported_media_type`).",
        );
    }
    // Keys are kept per tenant: a POST without a token has none.
    let idempotent = method == HttpMethod::Post && authenticated;
    if idempotent {
        let params = op.parameters.get_or_insert_with(Vec::new);
        params.push(
            ParameterBuilder::new()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "Makes the POST safe to retry: a request with a key already used with \
                     the same request replays the first answer (with `Idempotent-Replayed: \
                     true`); with another request it answers 409 `conflict`. Keys are kept \
                     24 hours per tenant.",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .max_length(Some(255))
                        .pattern(Some("^[\\x20-\\x7E]+$")),
                ))
                .build(),
        );
        error(
            op,
            400,
            "Invalid input (`invalid_input`, the fields named in `details.fields`), \
             malformed JSON (`json_error`) or a bad `Idempotency-Key`.",
        );
        error(
            op,
            409,
            "The `Idempotency-Key` was used with another request, or its first request \
             is still running (`conflict`).",
        );
    }
    error(
        op,
        500,
        "Something failed on meson's side (`service_error`); retry later.",
    );
    if authenticated {
        error(
            op,
            503,
            "meson cannot reach its database (`unavailable`): nothing was done; retry after \
             `Retry-After` seconds.",
        );
    }
    error(
        op,
        504,
        "The request took longer than 30 seconds (`timeout`).",
    );
    let replays = idempotent;
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        // Sent once the token is known and until the handler's answer; a
        // refused token (401), oversized headers (431) and server-side
        // failures may come without them.
        if authenticated
            && !["401", "421", "431"].contains(&status.as_str())
            && !status.starts_with('5')
        {
            for (name, description) in RATE_LIMIT_HEADERS {
                response.headers.insert(
                    name.to_owned(),
                    HeaderBuilder::new()
                        .schema(
                            ObjectBuilder::new()
                                .schema_type(Type::Integer)
                                .minimum(Some(0)),
                        )
                        .description(Some(description))
                        .build(),
                );
            }
            if status == "429" {
                response.headers.insert(
                    "Retry-After".to_owned(),
                    HeaderBuilder::new()
                        .schema(
                            ObjectBuilder::new()
                                .schema_type(Type::Integer)
                                .minimum(Some(1)),
                        )
                        .description(Some("Seconds until a request may pass again."))
                        .build(),
                );
            }
        }
        if authenticated && status == "503" {
            response.headers.insert(
                "Retry-After".to_owned(),
                HeaderBuilder::new()
                    .schema(
                        ObjectBuilder::new()
                            .schema_type(Type::Integer)
                            .minimum(Some(1)),
                    )
                    .description(Some(
                        "With `unavailable`: seconds after which the database is tried again.",
                    ))
                    .build(),
            );
        }
        response.headers.insert(
            "X-Correlation-Id".to_owned(),
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::String))
                .description(Some(
                    "The request's id in meson's logs: the caller's own `X-Correlation-Id` \
                     when it is 1 to 64 letters, digits and dashes, a new UUID otherwise.",
                ))
                .build(),
        );
        // Only 2xx and 4xx answers are stored for replay.
        if replays && !status.starts_with('5') {
            response.headers.insert(
                "Idempotent-Replayed".to_owned(),
                HeaderBuilder::new()
                    .schema(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .enum_values(Some(["true"])),
                    )
                    .description(Some(
                        "`true` when this is the stored answer to an earlier request with \
                         the same `Idempotency-Key`.",
                    ))
                    .build(),
            );
        }
    }
}

/// The headers on every answer to an authenticated request.
const RATE_LIMIT_HEADERS: [(&str, &str); 3] = [
    (
        "RateLimit-Limit",
        "Requests the tenant may burst in this budget (actions are read from a larger \
         one of their own).",
    ),
    ("RateLimit-Remaining", "Requests left in the budget now."),
    ("RateLimit-Reset", "Seconds until the budget is full again."),
];

/// Documents an error answer unless the operation already does.
fn error(op: &mut Operation, status: u16, description: &str) {
    op.responses
        .responses
        .entry(status.to_string())
        .or_insert_with(|| error_response(description).into());
}

/// An answer with the error envelope.
pub fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                    ErrorResponse::name(),
                ))))
                .build(),
        )
        .build()
}

/// `GET /openapi.json` (the rendered document, byte for byte the checked-in
/// file) and Swagger UI at `/docs`, its assets built into the binary.
pub fn routes(json: String) -> Router {
    let json = axum::body::Bytes::from(json);
    let doc = move || {
        let json = json.clone();
        async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                json,
            )
        }
    };
    Router::new()
        .route("/openapi.json", axum::routing::get(doc))
        .merge(SwaggerUi::new("/docs").config(utoipa_swagger_ui::Config::from("/openapi.json")))
}

/// Headers every answer that documents them carries, whatever happens.
const ALWAYS_SENT: [&str; 6] = [
    "X-Correlation-Id",
    "Link",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "Retry-After",
];

/// The document as served and checked in: pretty JSON and a trailing
/// newline, with `required: true` on the headers that are always sent
/// (utoipa's `Header` cannot say so) and links' fields in camel case.
pub fn render(doc: &OpenApi) -> String {
    let mut json: Ordered = serde_json::to_string(doc)
        .and_then(|s| serde_json::from_str(&s))
        .unwrap_or(Ordered::Scalar(serde_json::Value::Null));
    for (_, item) in json.entries_mut("paths") {
        for (_, op) in item.entries() {
            for (status, response) in op.entries_mut("responses") {
                // A 503 carries `Retry-After` with `unavailable` only.
                let maybe_retry = status.as_str() == "503";
                for (name, header) in response.entries_mut("headers") {
                    if ALWAYS_SENT.contains(&name.as_str())
                        && !(maybe_retry && name == "Retry-After")
                        && let Ordered::Object(fields) = header
                    {
                        fields.push(("required".to_owned(), Ordered::Scalar(true.into())));
                    }
                }
                // utoipa 5 writes a Link object's fields in snake case.
                for (_, link) in response.entries_mut("links") {
                    for (key, _) in link.entries() {
                        match key.as_str() {
                            "operation_id" => *key = "operationId".to_owned(),
                            "operation_ref" => *key = "operationRef".to_owned(),
                            "request_body" => *key = "requestBody".to_owned(),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    let mut out = serde_json::to_string_pretty(&json).unwrap_or_default();
    out.push('\n');
    out
}

/// JSON that keeps the order of object keys (`serde_json::Value` sorts
/// them), so the document reads in the order utoipa writes it.
enum Ordered {
    Scalar(serde_json::Value),
    Array(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    /// This object's entries (none if it is not an object).
    fn entries(&mut self) -> std::slice::IterMut<'_, (String, Ordered)> {
        match self {
            Ordered::Object(fields) => fields.iter_mut(),
            _ => [].iter_mut(),
        }
    }

    /// The entries of the object under `key`, if both are objects.
    fn entries_mut(&mut self, key: &str) -> std::slice::IterMut<'_, (String, Ordered)> {
        match self.entries().find(|(k, _)| k == key) {
            Some((_, inner)) => inner.entries(),
            None => [].iter_mut(),
        }
    }
}

impl serde::Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Ordered::Scalar(v) => v.serialize(s),
            Ordered::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Object(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(serde_json::Value::Null))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(v.into()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = a.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = a.next_entry()? {
                    fields.push(entry);
                }
                Ok(Ordered::Object(fields))
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn doc() -> Value {
        serde_json::from_str(&crate::http::openapi_json()).expect("document as json")
    }

    /// The checked-in document matches the code. To regenerate it:
    /// `MESON_WRITE_OPENAPI=1 cargo test -p meson-api openapi`.
    #[test]
    fn openapi_document_is_fresh() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openapi/meson.json");
        let fresh = crate::http::openapi_json();
        if std::env::var(WRITE_ENV).as_deref() == Ok("1") {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("openapi/");
            std::fs::write(&path, &fresh).expect("write openapi/meson.json");
            return;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == fresh,
            "openapi/meson.json is stale; regenerate it with \
             `{WRITE_ENV}=1 cargo test -p meson-api openapi` and commit it"
        );
    }

    #[test]
    fn openapi_is_3_1_and_every_ref_resolves() {
        let doc = doc();
        assert_eq!(doc["openapi"], "3.1.0");
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, v) in m {
                        match (k.as_str(), v) {
                            ("$ref", Value::String(r)) => out.push(r.clone()),
                            _ => refs(v, out),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(!all.is_empty());
        for r in all {
            let pointer = r.strip_prefix('#').expect("local ref");
            assert!(doc.pointer(pointer).is_some(), "dangling {r}");
        }
    }

    #[test]
    fn every_operation_documents_errors_and_ids() {
        let doc = doc();
        let paths = doc["paths"].as_object().expect("paths");
        assert!(paths.len() >= 10, "{:?}", paths.keys());
        let ids: std::collections::HashSet<&str> = paths
            .values()
            .flat_map(|item| item.as_object().into_iter().flatten())
            .filter_map(|(_, op)| op["operationId"].as_str())
            .collect();
        let ops: usize = paths
            .values()
            .map(|item| item.as_object().map_or(0, |m| m.len()))
            .sum();
        assert_eq!(ids.len(), ops, "operation ids are unique");
        for (path, item) in paths {
            for (method, op) in item.as_object().expect("path item") {
                let at = format!("{method} {path}");
                assert!(op["operationId"].is_string(), "{at}: operationId");
                assert!(op["summary"].is_string(), "{at}: summary");
                let responses = op["responses"].as_object().expect("responses");
                for status in ["500", "504"] {
                    assert!(responses.contains_key(status), "{at}: {status}");
                }
                let bearer = op["security"] == serde_json::json!([{ "bearer": [] }]);
                assert!(bearer || op["security"] == serde_json::json!([{}]), "{at}");
                if bearer {
                    assert!(responses.contains_key("401"), "{at}: 401");
                }
                for (status, r) in responses {
                    assert_eq!(
                        r["headers"]["X-Correlation-Id"]["required"], true,
                        "{at} {status}: X-Correlation-Id"
                    );
                    for (name, link) in r["links"].as_object().into_iter().flatten() {
                        let target = link["operationId"].as_str().unwrap_or_default();
                        assert!(
                            ids.contains(target),
                            "{at} {status}: link {name} to {target:?}"
                        );
                    }
                    // `/readyz` says what is down in its own shape.
                    let own = path == "/readyz" && status == "503";
                    if (status.starts_with('4') || status.starts_with('5')) && !own {
                        assert_eq!(
                            r["content"]["application/json"]["schema"]["$ref"],
                            "#/components/schemas/ErrorResponse",
                            "{at} {status}: the error envelope"
                        );
                    }
                }
            }
        }
    }

    /// Every code the domain error can carry is in the document's `ErrorCode`.
    #[test]
    fn error_codes_are_documented() {
        use meson_core::Error;
        let errors = [
            Error::not_found("vm", "x"),
            Error::invalid("f", "m"),
            Error::Json {
                message: "m".into(),
            },
            Error::Conflict {
                message: "m".into(),
            },
            Error::Locked {
                kind: "vm",
                id: "x".into(),
                action_id: uuid::Uuid::nil(),
            },
            Error::AlreadyExists {
                kind: "vm",
                field: "name".into(),
            },
            Error::QuotaExceeded { limits: vec![] },
            Error::InsufficientCapacity { reason: "r".into() },
            Error::Unavailable {
                message: "m".into(),
            },
            Error::Outage {
                what: "the database",
                retry_after: 1,
                source: None,
            },
            Error::PayloadTooLarge { limit: 1 },
            Error::UnsupportedMediaType {
                message: "m".into(),
            },
            Error::Timeout,
            Error::Unauthorized,
            Error::Forbidden {
                message: "m".into(),
            },
            Error::internal("x"),
        ];
        for e in errors {
            let body = serde_json::to_value(crate::error::body_of(&e)).expect("json");
            let code: Result<meson_types::ErrorCode, _> =
                serde_json::from_value(body["error"]["code"].clone());
            assert!(
                code.is_ok(),
                "{} is not in ErrorCode",
                body["error"]["code"]
            );
            let details: Result<meson_types::ErrorDetails, _> =
                serde_json::from_value(body["error"]["details"].clone());
            assert!(
                details.is_ok(),
                "{}: details {}",
                e.code(),
                body["error"]["details"]
            );
        }
    }
}

//! API tokens issued by meson (`meson_core::token`): `/v1/tokens` over
//! REST, `meson.v1.TokenService` over gRPC, both through the app calls
//! here. An owner creates one (its secret shown once; meson keeps its
//! SHA-256), lists, reads and revokes them; a secret authenticates a
//! request as `token:<id>` ([`App::token_principal`], read by the gate at
//! every request, so a revoked token is refused at once on every replica).

use crate::app::App;
use crate::auth::{Principal, Role};
use crate::authz::{self, Rule};
use crate::error::ApiResult;
use crate::grpc::convert::json::Obj;
use crate::grpc::convert::meta::timestamp;
use crate::grpc::convert::warnings;
use crate::grpc::{Svc, answer, id, note_resource, principal};
use crate::http::responses::BadId;
use crate::http::{AppState, JsonBody, parse_id, query_pairs};
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_core::parse::Warning;
use meson_core::token::{ApiToken, SHOWN_PREFIX_LEN, TokenCreate, new_secret};
use meson_core::{Error, Result, TokenId};
use meson_proto::meson::v1 as pb;
use meson_types::ErrorResponse;
use meson_types::token::{self as wire, TokenCreateRequest, TokenCreateResponse, TokenList, TokenResponse};
use serde_json::Value;
use tonic::{Request, Status};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How its operations read a request body.
pub(super) const BODIES: &[super::Body] = &[super::Body {
    method: "post",
    path: "/v1/tokens",
    canonical: super::canonical::<TokenCreateRequest>,
    read: |v| super::shown(TokenCreate::parse(v)),
}];

/// A tenant's owners manage its tokens (each at most its creator's role);
/// creating one hands out a credential.
pub(super) const RULES: &[Rule] = &[
    authz::owner_read("token_list"),
    authz::owner_read("token_get"),
    authz::credential("token_create", Role::Owner),
    authz::owner_write("token_delete"),
];

pub(super) fn routes() -> OpenApiRouter<AppState> {
    let router = OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, delete));
    super::described(
        router,
        "tokens",
        "API tokens meson issues for a tenant's automation",
    )
}

pub(super) fn grpc(svc: &Svc, max: usize) -> pb::token_service_server::TokenServiceServer<Svc> {
    pb::token_service_server::TokenServiceServer::new(svc.clone()).max_decoding_message_size(max)
}

// The app layer.

/// A token just created, with its secret.
pub struct TokenCreated {
    pub token: ApiToken,
    pub secret: String,
    pub warnings: Vec<Warning>,
}

/// The subject a token's requests are made by (the audit log's).
pub fn subject(id: TokenId) -> String {
    format!("token:{id}")
}

impl App {
    /// A token of the caller's tenant, with a role no higher than the
    /// caller's own.
    pub async fn token_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<TokenCreated> {
        let (req, warnings) = TokenCreate::parse(body)?;
        let role = Role::from_claim(&req.role)
            .ok_or_else(|| Error::invalid("role", "must be viewer, editor or owner"))?;
        if role > p.role {
            return Err(Error::invalid(
                "role",
                format!(
                    "a token cannot have more rights than its creator: at most {}",
                    p.role.as_str()
                ),
            ));
        }
        let secret = new_secret();
        let token = ApiToken {
            id: TokenId::new(),
            tenant: p.tenant.clone(),
            name: req.name,
            role: req.role,
            prefix: secret[..SHOWN_PREFIX_LEN].to_owned(),
            created_by: p.subject.clone(),
            created: chrono::Utc::now(),
            expires: None,
            revoked: None,
            revoked_by: None,
            last_used: None,
        };
        let token = meson_db::tokens::insert(
            &self.pool,
            &token,
            &crate::app::secret_hash(&secret),
            req.expires_in,
        )
        .await?;
        tracing::info!(token = %token.id, role = %token.role, "token created");
        Ok(TokenCreated {
            token,
            secret,
            warnings,
        })
    }

    /// The tenant's tokens, newest first; revoked ones too when asked.
    pub async fn token_list(&self, _p: &Principal, revoked: bool) -> Result<Vec<ApiToken>> {
        meson_db::tokens::list(&self.pool, revoked).await
    }

    pub async fn token_get(&self, _p: &Principal, id: TokenId) -> Result<ApiToken> {
        meson_db::tokens::get(&self.pool, id)
            .await?
            .ok_or_else(|| Error::not_found("token", id))
    }

    /// Revokes a token: every request with it is refused from now on, on
    /// every replica (each reads the token's row). One revoked already is a
    /// `conflict`.
    pub async fn token_delete(&self, p: &Principal, id: TokenId) -> Result<ApiToken> {
        match meson_db::tokens::revoke(&self.pool, id, &p.subject).await? {
            Some(t) => {
                tracing::info!(token = %id, "token revoked");
                Ok(t)
            }
            None => {
                self.token_get(p, id).await?;
                Err(Error::Conflict {
                    message: format!("token {id} is revoked already"),
                })
            }
        }
    }

    /// The caller a token's secret stands for: its tenant and role, as
    /// `token:<id>`. Unknown, revoked or expired: `unauthorized`; the
    /// database down: `unavailable`, as every request then.
    pub async fn token_principal(&self, secret: &str) -> Result<Principal> {
        self.breaker.check()?;
        // Whose it is is not known before it is found: the system scope,
        // and the secret is the wall.
        let found = self
            .watched(meson_db::scope::system(meson_db::tokens::authenticate(
                &self.pool,
                &crate::app::secret_hash(secret),
            )))
            .await?;
        let t = found.ok_or_else(|| {
            tracing::info!("rejected bearer token: no live meson token has this secret");
            Error::Unauthorized
        })?;
        let role = Role::from_claim(&t.role)
            .ok_or_else(|| Error::internal(format!("token {} has role {:?}", t.id, t.role)))?;
        Ok(Principal {
            tenant: t.tenant,
            subject: subject(t.id),
            role,
            email: None,
        })
    }
}

/// A token as both transports show it (never its secret).
fn view(t: &ApiToken) -> wire::ApiToken {
    wire::ApiToken {
        id: t.id.0,
        name: t.name.clone(),
        role: t.role.clone(),
        prefix: t.prefix.clone(),
        created_by: t.created_by.clone(),
        created: t.created,
        expires: t.expires,
        last_used: t.last_used,
        revoked: t.revoked,
        revoked_by: t.revoked_by.clone(),
    }
}

// REST.

/// The tenant's tokens.
#[utoipa::path(
    get,
    path = "/v1/tokens",
    tag = "tokens",
    operation_id = "token_list",
    summary = "List API tokens",
    description = "The tenant's live tokens, newest first (never their secrets); with \
        `revoked=true` the revoked ones too. Owners only.",
    params(("revoked" = Option<bool>, Query, description = "Also the revoked tokens.")),
    responses(
        (status = 200, description = "The tokens.", body = TokenList),
        (status = 400, description = "A bad query parameter (`invalid_input`).",
            body = ErrorResponse),
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
    ),
)]
async fn list(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<TokenList>> {
    let mut revoked = false;
    for (k, v) in query_pairs(q.as_deref())? {
        if k == "revoked" {
            revoked = crate::app::list::query_bool("revoked", &v)?;
        }
    }
    let tokens = s.app.token_list(&p, revoked).await?;
    Ok(Json(TokenList {
        tokens: tokens.iter().map(view).collect(),
    }))
}

/// Issues a token.
#[utoipa::path(
    post,
    path = "/v1/tokens",
    tag = "tokens",
    operation_id = "token_create",
    summary = "Create an API token",
    description = "Issues a bearer token (`secret`, shown this once: meson keeps its SHA-256) \
        for the tenant, with `role` at most the caller's. It authenticates every REST and \
        gRPC call as `token:<id>` until it expires or is revoked; each use is checked \
        against the database, so a revoked token is refused at once by every replica. Owners \
        only.",
    request_body(content = TokenCreateRequest, content_type = "application/json",
        example = json!({"name": "ci-deploys", "role": "editor", "expires_in": 7776000})),
    responses(
        (status = 201, description = "The token and its secret.", body = TokenCreateResponse,
            links(("GetToken" = (operation_id = "token_get",
                parameters(("id" = "$response.body#/token/id")))))),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named in `details.fields`: `role` above the caller's own), or malformed JSON \
            (`json_error`).", body = ErrorResponse),
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 409, description = "A live token of the tenant has this name \
            (`uniqueness_error`), or the Idempotency-Key was used with another body \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let c = s.app.token_create(&p, &body).await?;
    let res = TokenCreateResponse {
        token: view(&c.token),
        secret: c.secret,
        warnings: c.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

/// Reads a token.
#[utoipa::path(
    get,
    path = "/v1/tokens/{id}",
    tag = "tokens",
    operation_id = "token_get",
    summary = "Get an API token",
    params(("id" = uuid::Uuid, Path, description = "The token's id.")),
    responses(
        (status = 200, description = "The token (never its secret).", body = TokenResponse),
        BadId,
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such token for this tenant (`not_found`).",
            body = ErrorResponse),
    ),
)]
async fn read(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<TokenResponse>> {
    let t = s.app.token_get(&p, parse_id(&id)?).await?;
    Ok(Json(TokenResponse {
        token: view(&t),
    }))
}

/// Revokes a token.
#[utoipa::path(
    delete,
    path = "/v1/tokens/{id}",
    tag = "tokens",
    operation_id = "token_delete",
    summary = "Revoke an API token",
    description = "From now on every request with it is refused (`401`), on every replica. \
        The record stays, with who revoked it.",
    params(("id" = uuid::Uuid, Path, description = "The token's id.")),
    responses(
        (status = 200, description = "The token, revoked.", body = TokenResponse),
        BadId,
        (status = 403, description = "The token's role is not owner (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such token for this tenant (`not_found`).",
            body = ErrorResponse),
        (status = 409, description = "It is revoked already (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<TokenResponse>> {
    let t = s.app.token_delete(&p, parse_id(&id)?).await?;
    Ok(Json(TokenResponse {
        token: view(&t),
    }))
}

// gRPC.

/// A token as gRPC shows it.
fn grpc_token(t: &ApiToken) -> pb::ApiToken {
    let t = view(t);
    pb::ApiToken {
        id: t.id.to_string(),
        name: t.name,
        role: t.role,
        prefix: t.prefix,
        created_by: t.created_by,
        created: Some(timestamp(t.created)),
        expires: t.expires.map(timestamp),
        last_used: t.last_used.map(timestamp),
        revoked: t.revoked.map(timestamp),
        revoked_by: t.revoked_by,
    }
}

/// A `CreateTokenRequest` as the REST body of `POST /v1/tokens`: an empty
/// name or role is absent (and named as missing); `expires_in` is sent
/// whenever it is set, 0 included (and named as out of range).
fn create_body(r: &pb::CreateTokenRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .str("role", &r.role)
        .opt("expires_in", r.expires_in)
        .value()
}

#[tonic::async_trait]
impl pb::token_service_server::TokenService for Svc {
    async fn create_token(
        &self,
        req: Request<pb::CreateTokenRequest>,
    ) -> Result<tonic::Response<pb::CreateTokenResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = create_body(req.get_ref());
            let c = self.0.app.token_create(&p, &body).await?;
            note_resource(&req, "token", c.token.id);
            Ok(pb::CreateTokenResponse {
                token: Some(grpc_token(&c.token)),
                secret: c.secret,
                warnings: warnings(&c.warnings),
            })
        };
        answer(r.await)
    }

    async fn list_tokens(
        &self,
        req: Request<pb::ListTokensRequest>,
    ) -> Result<tonic::Response<pb::ListTokensResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let tokens = self.0.app.token_list(&p, req.get_ref().revoked).await?;
            Ok(pb::ListTokensResponse {
                tokens: tokens
                    .iter()
                    .map(grpc_token)
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_token(
        &self,
        req: Request<pb::GetTokenRequest>,
    ) -> Result<tonic::Response<pb::ApiToken>, Status> {
        let p = principal(&req)?;
        let r = async {
            let t = self
                .0
                .app
                .token_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(grpc_token(&t))
        };
        answer(r.await)
    }

    async fn revoke_token(
        &self,
        req: Request<pb::RevokeTokenRequest>,
    ) -> Result<tonic::Response<pb::ApiToken>, Status> {
        let p = principal(&req)?;
        let r = async {
            let token: TokenId = id("id", &req.get_ref().id)?;
            note_resource(&req, "token", token);
            let t = self.0.app.token_delete(&p, token).await?;
            Ok(grpc_token(&t))
        };
        answer(r.await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(r: &pb::CreateTokenRequest) -> Vec<String> {
        crate::grpc::convert::rejected(TokenCreate::parse(&create_body(r)))
    }

    /// Every key the gRPC conversion writes is one the REST reader reads.
    #[test]
    fn the_grpc_request_is_read_as_the_rest_body() {
        use crate::grpc::convert::shapes::{filled, unread};
        let m: pb::CreateTokenRequest = filled("meson.v1.CreateTokenRequest");
        let unread = unread(&create_body(&m), |v| drop(TokenCreate::parse(v)));
        assert!(unread.is_empty(), "written, never read: {unread:?}");
    }

    #[test]
    fn a_token_request_is_the_rest_one() {
        let r = pb::CreateTokenRequest {
            name: "ci-deploys".into(),
            role: "editor".into(),
            expires_in: Some(7_776_000),
        };
        assert_eq!(
            create_body(&r),
            json!({"name": "ci-deploys", "role": "editor", "expires_in": 7_776_000})
        );
        let never = pb::CreateTokenRequest {
            expires_in: None,
            ..r.clone()
        };
        assert_eq!(
            create_body(&never),
            json!({"name": "ci-deploys", "role": "editor"})
        );
        let (parsed, warnings) = TokenCreate::parse(&create_body(&r)).unwrap();
        assert_eq!(
            (
                parsed.name.as_str(),
                parsed.role.as_str(),
                parsed.expires_in
            ),
            ("ci-deploys", "editor", Some(7_776_000))
        );
        assert!(warnings.is_empty());

        // Bad fields are named as REST names them.
        assert_eq!(
            rejected(&pb::CreateTokenRequest::default()),
            ["name", "role"]
        );
        let bad = |f: fn(&mut pb::CreateTokenRequest)| {
            let mut b = r.clone();
            f(&mut b);
            rejected(&b)
        };
        assert_eq!(bad(|b| b.role = "admin".into()), ["role"]);
        assert_eq!(bad(|b| b.name = "x".repeat(65)), ["name"]);
        assert_eq!(bad(|b| b.expires_in = Some(0)), ["expires_in"]);
        assert_eq!(bad(|b| b.expires_in = Some(59)), ["expires_in"]);
        assert_eq!(bad(|b| b.expires_in = Some(63_244_801)), ["expires_in"]);
    }
}

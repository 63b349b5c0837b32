//! The handlers that create, read, list, change and delete a resource,
//! written once.
//!
//! A resource implements [`Resource`]: which app calls read, list and
//! update it, and how its answers are made; [`Creatable`] when it is made
//! by a `POST` to its collection; and [`Deletable`] when its delete is an
//! action (a key or a token answers its delete itself). Its module keeps
//! the OpenAPI description of each operation (what differs between
//! resources), whose body is one call of the handler here, and imports
//! [`prelude`].

use super::{AppState, JsonBody, action_answer, paged, pagination, parse_id, query_pairs};
use crate::app::App;
use crate::auth::Principal;
use crate::error::ApiResult;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use meson_core::Result;
use meson_core::action::Action;
use meson_core::parse::Warning;
use serde::Serialize;
use std::future::Future;

/// What a resource's REST module uses, whatever the resource.
pub(crate) mod prelude {
    pub(crate) use super::{Creatable, Deletable, Resource};
    pub(crate) use crate::app::App;
    pub(crate) use crate::auth::Principal;
    pub(crate) use crate::error::ApiResult;
    pub(crate) use crate::http::{AppState, parse_id, resource};
    pub(crate) use crate::views;
    pub(crate) use axum::extract::{Path, State};
    pub(crate) use axum::response::Response;
    pub(crate) use meson_core::Result;
    pub(crate) use meson_core::action::Action;
    pub(crate) use meson_core::parse::Warning;
    pub(crate) use meson_types::ErrorResponse;
    pub(crate) use utoipa_axum::router::OpenApiRouter;
    pub(crate) use utoipa_axum::routes;
}

/// A resource with the REST operations every resource has.
pub trait Resource: 'static {
    /// The id in its path (`/v1/<collection>/{id}`).
    type Id: std::str::FromStr + Send;
    /// What the app reads of one: the row and what its view shows with it.
    type Item: Send;
    /// The answer of `GET`.
    type Got: Serialize;
    /// The answer of `PATCH`.
    type Updated: Serialize;
    /// A page as the app reads it.
    type Listed: Paginated + Send;
    /// A page as it is answered.
    type Page: Serialize;
    /// The collection's path, for the list's `Link` header.
    const PATH: &'static str;

    fn get(
        app: &App,
        p: &Principal,
        id: Self::Id,
    ) -> impl Future<Output = Result<Self::Item>> + Send;

    fn update(
        app: &App,
        p: &Principal,
        id: Self::Id,
        body: &serde_json::Value,
    ) -> impl Future<Output = Result<(Self::Item, Vec<Warning>)>> + Send;

    /// Reads the page the query pairs ask for (filters, sort, page).
    fn list(
        app: &App,
        p: &Principal,
        query: &[(String, String)],
    ) -> impl Future<Output = Result<Self::Listed>> + Send;

    fn got(item: &Self::Item) -> Self::Got;

    fn updated(item: &Self::Item, warnings: Vec<meson_types::Warning>) -> Self::Updated;

    /// The page's answer and where it stands in the list.
    fn page(listed: &Self::Listed, meta: meson_types::Meta) -> Self::Page;
}

/// A page as the app reads it: where it stands in its list.
pub trait Paginated {
    fn pagination(&self) -> meson_types::Pagination;
}

impl<T> Paginated for crate::app::Paged<T> {
    fn pagination(&self) -> meson_types::Pagination {
        crate::app::Paged::pagination(self)
    }
}

/// A resource made by `POST /v1/<collection>`.
pub trait Creatable: Resource {
    /// The answer of `POST` (`201`): the resource, with its action if it
    /// has one, and the request's warnings.
    type Created: Serialize;

    fn create(
        app: &App,
        p: &Principal,
        body: &serde_json::Value,
    ) -> impl Future<Output = Result<Self::Created>> + Send;
}

/// A resource whose delete is an action.
pub trait Deletable: Resource {
    fn delete(
        app: &App,
        p: &Principal,
        id: Self::Id,
    ) -> impl Future<Output = Result<Action>> + Send;
}

/// `POST /v1/<collection>`: `201` with what was made.
pub async fn create<R: Creatable>(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let created = R::create(&s.app, &p, &body).await?;
    Ok((axum::http::StatusCode::CREATED, Json(created)).into_response())
}

/// `GET /v1/<collection>/{id}`.
pub async fn get<R: Resource>(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<R::Got>> {
    let item = R::get(&s.app, &p, parse_id(&id)?).await?;
    Ok(Json(R::got(&item)))
}

/// `GET /v1/<collection>`: a page, with its `Link` header.
pub async fn list<R: Resource>(
    State(s): State<AppState>,
    p: Principal,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let listed = R::list(&s.app, &p, &pairs).await?;
    let (meta, link) = pagination(R::PATH, &pairs, listed.pagination());
    Ok(paged(R::page(&listed, meta), link))
}

/// `PATCH /v1/<collection>/{id}`: the resource as it is now, with the
/// request's warnings.
pub async fn update<R: Resource>(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<R::Updated>> {
    let (item, warnings) = R::update(&s.app, &p, parse_id(&id)?, &body).await?;
    Ok(Json(R::updated(
        &item,
        warnings.iter().map(crate::views::warning).collect(),
    )))
}

/// `DELETE /v1/<collection>/{id}`: the delete action.
pub async fn delete<R: Deletable>(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<meson_types::ActionResponse>> {
    let action = R::delete(&s.app, &p, parse_id(&id)?).await?;
    Ok(action_answer(&action))
}

/// Declares `read`, a resource's `GET /v1/<collection>/{id}` through
/// [`get`], with its OpenAPI description: only what differs between
/// resources is written at the call.
macro_rules! get_operation {
    (
        $res:ty => $body:ty,
        $(doc: $doc:literal,)+
        path: $path:tt,
        tag: $tag:tt,
        operation_id: $op:tt,
        summary: $summary:tt,
        id: $id:tt,
        found: $found:tt,
        missing: $missing:ident $(,)?
    ) => {
        $(#[doc = $doc])+
        #[utoipa::path(
            get,
            path = $path,
            tag = $tag,
            operation_id = $op,
            summary = $summary,
            params(("id" = uuid::Uuid, Path, description = $id)),
            responses(
                (status = 200, description = $found, body = $body),
                $crate::http::responses::BadId,
                $missing,
            ),
        )]
        async fn read(
            s: axum::extract::State<AppState>,
            p: crate::auth::Principal,
            id: axum::extract::Path<String>,
        ) -> crate::error::ApiResult<axum::Json<$body>> {
            $crate::http::resource::get::<$res>(s, p, id).await
        }
    };
}
pub(crate) use get_operation;

/// Declares `list`, a resource's `GET /v1/<collection>` through [`list`]
/// (paged by number or cursor, with a `Link` header), with its OpenAPI
/// description: only what differs between resources is written at the call.
macro_rules! list_operation {
    (
        $res:ty => $body:ty,
        $(doc: $doc:literal,)+
        path: $path:tt,
        tag: $tag:tt,
        operation_id: $op:tt,
        summary: $summary:tt,
        query: $query:ty,
        found: $found:tt $(,)?
    ) => {
        $(#[doc = $doc])+
        #[utoipa::path(
            get,
            path = $path,
            tag = $tag,
            operation_id = $op,
            summary = $summary,
            params(
                meson_types::requests::PageQuery,
                meson_types::requests::CursorQuery,
                $query,
            ),
            responses(
                (status = 200, description = $found, body = $body,
                    headers(("Link" = String, description = "RFC 8288 links to the `next` page \
                        (by cursor) and the `prev` and `last` pages (by number), with the call's \
                        filters and sort."))),
                $crate::http::responses::BadQuery,
            ),
        )]
        async fn list(
            s: axum::extract::State<AppState>,
            p: crate::auth::Principal,
            q: axum::extract::RawQuery,
        ) -> crate::error::ApiResult<axum::response::Response> {
            $crate::http::resource::list::<$res>(s, p, q).await
        }
    };
}
pub(crate) use list_operation;

/// Declares `$name`, a resource's operation served by the shared handler
/// of the same name (`create`, `update`, `delete`), with the call's
/// `#[utoipa::path]` description.
macro_rules! shared_operation {
    (
        $name:ident::<$res:ty>($($arg:ident: $ty:ty),*) -> $out:ty;
        [$($doc:literal)*]
        ($($path:tt)*)
    ) => {
        $(#[doc = $doc])*
        #[utoipa::path($($path)*)]
        async fn $name(
            s: axum::extract::State<AppState>,
            p: crate::auth::Principal,
            $($arg: $ty),*
        ) -> crate::error::ApiResult<$out> {
            $crate::http::resource::$name::<$res>(s, p, $($arg),*).await
        }
    };
}
pub(crate) use shared_operation;

/// Declares `create`, a resource's `POST /v1/<collection>` through
/// [`create`]: the handler is the shared one, the `#[utoipa::path]`
/// description (request body, answers) is the call's, as it is written on
/// any handler.
macro_rules! create_operation {
    ($res:ty; $(#[doc = $doc:literal])* #[utoipa::path($($path:tt)*)]) => {
        $crate::http::resource::shared_operation! {
            create::<$res>(body: $crate::http::JsonBody) -> axum::response::Response;
            [$($doc)*]
            ($($path)*)
        }
    };
}
pub(crate) use create_operation;

/// Declares `update`, a resource's `PATCH /v1/<collection>/{id}` through
/// [`update`], as [`create_operation`] declares `create`.
macro_rules! update_operation {
    ($res:ty => $body:ty; $(#[doc = $doc:literal])* #[utoipa::path($($path:tt)*)]) => {
        $crate::http::resource::shared_operation! {
            update::<$res>(
                id: axum::extract::Path<String>,
                body: $crate::http::JsonBody
            ) -> axum::Json<$body>;
            [$($doc)*]
            ($($path)*)
        }
    };
}
pub(crate) use update_operation;

/// Declares `delete`, a resource's `DELETE /v1/<collection>/{id}` through
/// [`delete`], as [`create_operation`] declares `create`.
macro_rules! delete_operation {
    ($res:ty; $(#[doc = $doc:literal])* #[utoipa::path($($path:tt)*)]) => {
        $crate::http::resource::shared_operation! {
            delete::<$res>(id: axum::extract::Path<String>)
                -> axum::Json<meson_types::ActionResponse>;
            [$($doc)*]
            ($($path)*)
        }
    };
}
pub(crate) use delete_operation;

/// Declares `$name`, an action on one resource (`POST
/// /v1/<collection>/{id}/actions/<verb>`): the app's `$call` reads the body
/// and starts it, and it is answered `201` with the action and the body's
/// warnings. The module keeps the operation's OpenAPI description, as
/// [`update_operation`] does.
macro_rules! action_operation {
    (
        $name:ident => $call:ident;
        $(#[doc = $doc:literal])*
        #[utoipa::path($($path:tt)*)]
    ) => {
        $(#[doc = $doc])*
        #[utoipa::path($($path)*)]
        async fn $name(
            axum::extract::State(s): axum::extract::State<AppState>,
            p: crate::auth::Principal,
            axum::extract::Path(id): axum::extract::Path<String>,
            $crate::http::JsonBody(body): $crate::http::JsonBody,
        ) -> crate::error::ApiResult<axum::response::Response> {
            let (action, warnings) = s.app.$call(&p, $crate::http::parse_id(&id)?, &body).await?;
            Ok($crate::http::action_created_warned(&action, &warnings))
        }
    };
}
pub(crate) use action_operation;

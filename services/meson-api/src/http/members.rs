//! `/v1/members`, `/v1/membership`, `/v1/invitations`: an organisation's
//! members and invitations, and the caller's own memberships.

use super::responses::BadId;
use super::{AppState, JsonBody, parse_id};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meson_types::ErrorResponse;
use meson_types::member::{
    InvitationAcceptRequest, InvitationAcceptResponse, InvitationCreateRequest,
    InvitationCreateResponse, InvitationList, InvitationResponse, MemberCreateRequest, MemberList,
    MemberResponse, MemberUpdateRequest, Membership, MembershipList,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(member_list, member_create))
        .routes(routes!(member_get, member_update, member_delete))
        .routes(routes!(membership_list, membership_leave))
        .routes(routes!(invitation_list, invitation_create))
        .routes(routes!(invitation_get, invitation_delete))
        .routes(routes!(invitation_accept))
}

fn member_response(
    m: &meson_core::member::Member,
    w: &[meson_core::parse::Warning],
) -> MemberResponse {
    MemberResponse {
        member: views::member(m),
        warnings: w.iter().map(views::warning).collect(),
    }
}

#[utoipa::path(
    get,
    path = "/v1/members",
    tag = "members",
    operation_id = "member_list",
    summary = "List the organisation's members",
    description = "The members of the organisation the call acts in (the token's, or the one \
        `Meson-Organization` names), owners first. A token's own claims make its caller a \
        member too, without a row here.",
    responses((status = 200, description = "The members.", body = MemberList)),
)]
async fn member_list(State(s): State<AppState>, p: Principal) -> ApiResult<Json<MemberList>> {
    let members = s.app.member_list(&p).await?;
    Ok(Json(MemberList {
        members: members.iter().map(views::member).collect(),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/members",
    tag = "members",
    operation_id = "member_create",
    summary = "Add a member",
    description = "Gives an identity provider's subject a role in the organisation, at most the \
        caller's own. Managers and owners.",
    request_body(content = MemberCreateRequest, content_type = "application/json",
        example = json!({"subject": "auth0|5f2b8c", "role": "editor", "email": "ann@example.com"})),
    responses(
        (status = 201, description = "The member.", body = MemberResponse),
        (status = 400, description = "A bad field (`invalid_input`, every rejected field \
            named in `details.fields`: `role` above the caller's own), or malformed JSON \
            (`json_error`).", body = ErrorResponse),
        (status = 409, description = "The subject is a member already (`uniqueness_error`).",
            body = ErrorResponse),
    ),
)]
async fn member_create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let (m, w) = s.app.member_create(&p, &body).await?;
    Ok((StatusCode::CREATED, Json(member_response(&m, &w))).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/members/{subject}",
    tag = "members",
    operation_id = "member_get",
    summary = "Get a member",
    params(("subject" = String, Path, description = "The member's subject, percent-encoded.")),
    responses(
        (status = 200, description = "The member.", body = MemberResponse),
        (status = 404, description = "No such member (`not_found`).", body = ErrorResponse),
    ),
)]
async fn member_get(
    State(s): State<AppState>,
    p: Principal,
    Path(subject): Path<String>,
) -> ApiResult<Json<MemberResponse>> {
    let m = s.app.member_get(&p, &subject).await?;
    Ok(Json(member_response(&m, &[])))
}

#[utoipa::path(
    patch,
    path = "/v1/members/{subject}",
    tag = "members",
    operation_id = "member_update",
    summary = "Change a member's role",
    description = "Both the member's role and the new one at most the caller's own: a manager \
        never changes an owner. The last owner keeps the role.",
    params(("subject" = String, Path, description = "The member's subject, percent-encoded.")),
    request_body(content = MemberUpdateRequest, content_type = "application/json",
        example = json!({"role": "manager"})),
    responses(
        (status = 200, description = "The member.", body = MemberResponse),
        (status = 400, description = "A bad field (`invalid_input`).", body = ErrorResponse),
        (status = 403, description = "The member ranks above the caller (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such member (`not_found`).", body = ErrorResponse),
        (status = 409, description = "It is the organisation's last owner (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn member_update(
    State(s): State<AppState>,
    p: Principal,
    Path(subject): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<MemberResponse>> {
    let (m, w) = s.app.member_update(&p, &subject, &body).await?;
    Ok(Json(member_response(&m, &w)))
}

#[utoipa::path(
    delete,
    path = "/v1/members/{subject}",
    tag = "members",
    operation_id = "member_delete",
    summary = "Remove a member",
    description = "A member ranked at most the caller. The last owner stays.",
    params(("subject" = String, Path, description = "The member's subject, percent-encoded.")),
    responses(
        (status = 200, description = "The member removed.", body = MemberResponse),
        (status = 403, description = "The member ranks above the caller (`forbidden`).",
            body = ErrorResponse),
        (status = 404, description = "No such member (`not_found`).", body = ErrorResponse),
        (status = 409, description = "It is the organisation's last owner (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn member_delete(
    State(s): State<AppState>,
    p: Principal,
    Path(subject): Path<String>,
) -> ApiResult<Json<MemberResponse>> {
    let m = s.app.member_delete(&p, &subject).await?;
    Ok(Json(member_response(&m, &[])))
}

#[utoipa::path(
    get,
    path = "/v1/membership",
    tag = "members",
    operation_id = "membership_list",
    summary = "List the caller's organisations",
    description = "Every organisation the caller may act in (its token's first), with its role \
        there and how it holds it: a token's claims, a membership, or an owner's or manager's \
        membership of an organisation above. Send `Meson-Organization: <id>` to act in one.",
    responses((status = 200, description = "The caller's organisations.", body = MembershipList)),
)]
async fn membership_list(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<MembershipList>> {
    let list = s.app.memberships(&p).await?;
    Ok(Json(MembershipList {
        subject: p.subject.clone(),
        memberships: list
            .into_iter()
            .map(|(organization, role, via)| Membership {
                organization,
                role: role.as_str().to_owned(),
                via: via.as_str().to_owned(),
            })
            .collect(),
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/membership",
    tag = "members",
    operation_id = "membership_leave",
    summary = "Leave the organisation",
    description = "Ends the caller's membership of the organisation the call acts in. The last \
        owner cannot leave. A token's own claims are the identity provider's: they are not \
        a membership and cannot be left here.",
    responses(
        (status = 200, description = "The membership that ended.", body = MemberResponse),
        (status = 404, description = "The caller is no member here (`not_found`).",
            body = ErrorResponse),
        (status = 409, description = "The caller is the last owner (`conflict`).",
            body = ErrorResponse),
    ),
)]
async fn membership_leave(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<MemberResponse>> {
    let m = s.app.membership_leave(&p).await?;
    Ok(Json(member_response(&m, &[])))
}

#[utoipa::path(
    get,
    path = "/v1/invitations",
    tag = "members",
    operation_id = "invitation_list",
    summary = "List invitations",
    description = "The organisation's invitations, newest first, whatever their status (never \
        their tokens). Managers and owners.",
    responses((status = 200, description = "The invitations.", body = InvitationList)),
)]
async fn invitation_list(
    State(s): State<AppState>,
    p: Principal,
) -> ApiResult<Json<InvitationList>> {
    let list = s.app.invitation_list(&p).await?;
    Ok(Json(InvitationList {
        invitations: list.iter().map(views::invitation).collect(),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/invitations",
    tag = "members",
    operation_id = "invitation_create",
    summary = "Invite someone by email",
    description = "An invitation to join the organisation with a role at most the caller's own. \
        Its `token` is shown this once (meson keeps its SHA-256): pass it to the invitee, who \
        accepts it signed in with that email, verified by the identity provider. One open \
        invitation per address. Managers and owners.",
    request_body(content = InvitationCreateRequest, content_type = "application/json",
        example = json!({"email": "bob@example.com", "role": "editor"})),
    responses(
        (status = 201, description = "The invitation and its token.",
            body = InvitationCreateResponse),
        (status = 400, description = "A bad field (`invalid_input`).", body = ErrorResponse),
        (status = 409, description = "An open invitation to this address exists \
            (`uniqueness_error`).", body = ErrorResponse),
    ),
)]
async fn invitation_create(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let made = s.app.invitation_create(&p, &body).await?;
    let res = InvitationCreateResponse {
        invitation: views::invitation(&made.invitation),
        token: made.token,
        warnings: made.warnings.iter().map(views::warning).collect(),
    };
    Ok((StatusCode::CREATED, Json(res)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/invitations/{id}",
    tag = "members",
    operation_id = "invitation_get",
    summary = "Get an invitation",
    params(("id" = uuid::Uuid, Path, description = "The invitation's id.")),
    responses(
        (status = 200, description = "The invitation.", body = InvitationResponse),
        BadId,
        (status = 404, description = "No such invitation (`not_found`).", body = ErrorResponse),
    ),
)]
async fn invitation_get(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<InvitationResponse>> {
    let i = s.app.invitation_get(&p, parse_id(&id)?).await?;
    Ok(Json(InvitationResponse {
        invitation: views::invitation(&i),
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/invitations/{id}",
    tag = "members",
    operation_id = "invitation_delete",
    summary = "Revoke an invitation",
    params(("id" = uuid::Uuid, Path, description = "The invitation's id.")),
    responses(
        (status = 200, description = "The invitation, revoked.", body = InvitationResponse),
        BadId,
        (status = 404, description = "No such invitation (`not_found`).", body = ErrorResponse),
        (status = 409, description = "It is accepted, revoked or expired already \
            (`conflict`).", body = ErrorResponse),
    ),
)]
async fn invitation_delete(
    State(s): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<InvitationResponse>> {
    let i = s.app.invitation_delete(&p, parse_id(&id)?).await?;
    Ok(Json(InvitationResponse {
        invitation: views::invitation(&i),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/invitations/accept",
    tag = "members",
    operation_id = "invitation_accept",
    summary = "Accept an invitation",
    description = "Makes the caller a member of the invitation's organisation, with its role. \
        Only a caller whose token carries a verified email (`email`, `email_verified: true`) \
        equal to the invitation's may; any organisation's token will do.",
    request_body(content = InvitationAcceptRequest, content_type = "application/json",
        example = json!({"token": "mesoninv_Xq3hT2bN8kLm4pQr7sVw1yZa5cEf9gHj2kMn6pRs"})),
    responses(
        (status = 200, description = "The invitation, accepted, and the membership.",
            body = InvitationAcceptResponse),
        (status = 400, description = "A bad field (`invalid_input`).", body = ErrorResponse),
        (status = 403, description = "The caller has no verified email, or another one \
            (`forbidden`).", body = ErrorResponse),
        (status = 404, description = "No invitation has this token (`not_found`).",
            body = ErrorResponse),
        (status = 409, description = "It is accepted, revoked or expired, or the caller is a \
            member already (`conflict`).", body = ErrorResponse),
    ),
)]
async fn invitation_accept(
    State(s): State<AppState>,
    p: Principal,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<InvitationAcceptResponse>> {
    let (i, m) = s.app.invitation_accept(&p, &body).await?;
    Ok(Json(InvitationAcceptResponse {
        invitation: views::invitation(&i),
        member: views::member(&m),
    }))
}

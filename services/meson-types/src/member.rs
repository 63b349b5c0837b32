//! Organisations' members and invitations, on the wire.

use crate::Warning;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A member's role in an organisation (documentation: the wire field is a
/// string). Viewers read; editors also create, change and delete; managers
/// also manage the members and invitations below owner; owners everything
/// of their organisation's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    Viewer,
    Editor,
    Manager,
    Owner,
}

/// The role a caller acts with (documentation: the wire field is a
/// string): a member's, or `admin`, an operator's token's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CallerRole {
    Viewer,
    Editor,
    Manager,
    Owner,
    Admin,
}

/// An identity provider's subject with a role in the organisation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Member {
    /// The subject (`sub` of its JWTs).
    #[schema(example = "auth0|5f2b8c")]
    pub subject: String,
    #[serde(default)]
    #[schema(required = true, example = "ann@example.com")]
    pub email: Option<String>,
    #[schema(value_type = MemberRole)]
    pub role: String,
    /// Who added it (or whose invitation it accepted).
    pub added_by: String,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    /// What it may hold of its own VMs (those it created in the
    /// organisation), below the organisation's quotas.
    #[serde(default)]
    pub limits: MemberLimits,
}

/// A member's own limits; null: none of its own (the organisation's
/// quotas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberLimits {
    #[serde(default)]
    #[schema(required = true, example = 5)]
    pub vms: Option<i64>,
    #[serde(default)]
    #[schema(required = true, example = 16)]
    pub vcpus: Option<i64>,
    #[serde(default)]
    #[schema(required = true, example = 32768)]
    pub ram_mib: Option<i64>,
}

/// `POST /v1/members`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberCreateRequest {
    #[schema(example = "auth0|5f2b8c", min_length = 1, max_length = 255)]
    pub subject: String,
    /// At most the caller's own role.
    #[schema(value_type = MemberRole)]
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "ann@example.com")]
    pub email: Option<String>,
}

/// `PATCH /v1/members/{subject}`: a role, limits, or both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberUpdateRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<MemberRole>)]
    pub role: Option<String>,
    /// Limits to set (a number) or lift (`null`); those not named stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"vms": 5, "ram_mib": null}))]
    pub limits: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberResponse {
    pub member: Member,
    /// Unknown fields that were ignored; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberList {
    /// Owners first, then by subject.
    pub members: Vec<Member>,
}

/// An organisation the caller belongs to, and its role there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Membership {
    /// The organisation (tenant) id: send it as `Meson-Organization` to act
    /// in it.
    #[schema(example = "acme")]
    pub organization: String,
    /// A member's role there; `admin` only for an operator's token in its
    /// own organisation.
    #[schema(value_type = CallerRole)]
    pub role: String,
    /// `token`: the caller's token names it; `member`: a membership;
    /// `inherited`: an owner's or manager's of a parent organisation.
    #[schema(example = "member")]
    pub via: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MembershipList {
    /// The caller's subject.
    pub subject: String,
    /// The token's organisation first.
    pub memberships: Vec<Membership>,
}

/// An invitation to join the organisation (never its token).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Invitation {
    pub id: Uuid,
    /// The organisation it is to.
    pub organization: String,
    #[schema(example = "bob@example.com")]
    pub email: String,
    #[schema(value_type = MemberRole)]
    pub role: String,
    /// `pending`, `accepted`, `revoked` or `expired`.
    #[schema(example = "pending")]
    pub status: String,
    pub invited_by: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    #[serde(default)]
    #[schema(required = true)]
    pub accepted: Option<DateTime<Utc>>,
    #[serde(default)]
    #[schema(required = true)]
    pub accepted_by: Option<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub revoked: Option<DateTime<Utc>>,
    #[serde(default)]
    #[schema(required = true)]
    pub revoked_by: Option<String>,
}

/// `POST /v1/invitations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationCreateRequest {
    #[schema(example = "bob@example.com", max_length = 254)]
    pub email: String,
    /// At most the caller's own role.
    #[schema(value_type = MemberRole)]
    pub role: String,
    /// Seconds until it expires, 3600 to 2592000 (30 days); 7 days when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = 604800, minimum = 3600, maximum = 2592000)]
    pub expires_in: Option<i64>,
}

/// An invitation just made, with the token to pass to the invitee (shown
/// this once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationCreateResponse {
    pub invitation: Invitation,
    /// What the invitee sends to `POST /v1/invitations/accept`, signed in
    /// with a verified email that is the invitation's. meson keeps only its
    /// hash.
    #[schema(example = "mesoninv_Xq3hT2bN8kLm4pQr7sVw1yZa5cEf9gHj2kMn6pRs")]
    pub token: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `POST /v1/invitations/accept`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationAcceptRequest {
    #[schema(example = "mesoninv_Xq3hT2bN8kLm4pQr7sVw1yZa5cEf9gHj2kMn6pRs")]
    pub token: String,
}

/// An invitation accepted: the membership it made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationAcceptResponse {
    pub invitation: Invitation,
    pub member: Member,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationResponse {
    pub invitation: Invitation,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvitationList {
    /// Newest first.
    pub invitations: Vec<Invitation>,
}

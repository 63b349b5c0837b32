//! Members, memberships and invitations: answers, and requests as the
//! REST ones.

use super::json::Obj;
use super::meta::timestamp;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn member(m: wire::member::Member) -> pb::Member {
    pb::Member {
        subject: m.subject,
        email: m.email,
        role: m.role,
        added_by: m.added_by,
        created: Some(timestamp(m.created)),
        updated: Some(timestamp(m.updated)),
        limits: Some(pb::MemberLimits {
            vms: m.limits.vms,
            vcpus: m.limits.vcpus,
            ram_mib: m.limits.ram_mib,
        }),
    }
}

pub fn membership(m: wire::member::Membership) -> pb::Membership {
    pb::Membership {
        organization: m.organization,
        role: m.role,
        via: m.via,
    }
}

pub fn invitation(i: wire::member::Invitation) -> pb::Invitation {
    pb::Invitation {
        id: i.id.to_string(),
        organization: i.organization,
        email: i.email,
        role: i.role,
        status: i.status,
        invited_by: i.invited_by,
        created: Some(timestamp(i.created)),
        expires: Some(timestamp(i.expires)),
        accepted: i.accepted.map(timestamp),
        accepted_by: i.accepted_by,
        revoked: i.revoked.map(timestamp),
        revoked_by: i.revoked_by,
    }
}

/// A `CreateMemberRequest` as the REST body of `POST /v1/members`: an
/// empty subject or role is absent (and named as missing); an email is
/// sent whenever it is set.
pub fn member_create(r: &pb::CreateMemberRequest) -> Value {
    Obj::new()
        .str("subject", &r.subject)
        .str("role", &r.role)
        .opt("email", r.email.clone())
        .value()
}

/// An `UpdateMemberRequest` as the REST body of `PATCH
/// /v1/members/{subject}`.
pub fn member_update(r: &pb::UpdateMemberRequest) -> Value {
    let mut body = Obj::new().str("role", &r.role).value();
    let mut limits = serde_json::Map::new();
    for (k, v) in &r.limits {
        limits.insert(k.clone(), (*v).into());
    }
    for k in &r.lift_limits {
        limits.insert(k.clone(), Value::Null);
    }
    if !limits.is_empty() {
        body["limits"] = Value::Object(limits);
    }
    body
}

/// A `CreateInvitationRequest` as the REST body of `POST /v1/invitations`:
/// `expires_in` is sent whenever it is set, 0 included (and named as out
/// of range).
pub fn invitation_create(r: &pb::CreateInvitationRequest) -> Value {
    Obj::new()
        .str("email", &r.email)
        .str("role", &r.role)
        .opt("expires_in", r.expires_in)
        .value()
}

/// An `AcceptInvitationRequest` as the REST body of `POST
/// /v1/invitations/accept`.
pub fn invitation_accept(r: &pb::AcceptInvitationRequest) -> Value {
    Obj::new().str("token", &r.token).value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::member::{InvitationAccept, InvitationCreate, MemberCreate, MemberUpdate};
    use serde_json::json;

    #[test]
    fn member_requests_are_the_rest_ones() {
        let r = pb::CreateMemberRequest {
            subject: "auth0|5f2b8c".into(),
            role: "editor".into(),
            email: Some("Ann@Example.com".into()),
        };
        assert_eq!(
            member_create(&r),
            json!({"subject": "auth0|5f2b8c", "role": "editor", "email": "Ann@Example.com"})
        );
        let (parsed, warnings) = MemberCreate::parse(&member_create(&r)).unwrap();
        assert_eq!(
            parsed,
            MemberCreate {
                subject: "auth0|5f2b8c".into(),
                role: "editor".into(),
                email: Some("ann@example.com".into()),
            }
        );
        assert!(warnings.is_empty());
        let no_email = pb::CreateMemberRequest {
            email: None,
            ..r.clone()
        };
        assert_eq!(
            member_create(&no_email),
            json!({"subject": "auth0|5f2b8c", "role": "editor"})
        );

        // Bad fields are named as REST names them.
        let rejected = |r: &pb::CreateMemberRequest| {
            crate::grpc::convert::rejected(MemberCreate::parse(&member_create(r)))
        };
        assert_eq!(
            rejected(&pb::CreateMemberRequest::default()),
            ["role", "subject"]
        );
        let bad = |f: fn(&mut pb::CreateMemberRequest)| {
            let mut b = r.clone();
            f(&mut b);
            rejected(&b)
        };
        assert_eq!(bad(|b| b.role = "admin".into()), ["role"]);
        assert_eq!(bad(|b| b.subject = "x".repeat(256)), ["subject"]);
        assert_eq!(bad(|b| b.email = Some("nope".into())), ["email"]);
        assert_eq!(bad(|b| b.email = Some(String::new())), ["email"]);

        let u = pb::UpdateMemberRequest {
            subject: "auth0|5f2b8c".into(),
            role: "manager".into(),
            ..Default::default()
        };
        assert_eq!(member_update(&u), json!({"role": "manager"}));
        assert_eq!(
            MemberUpdate::parse(&member_update(&u))
                .unwrap()
                .0
                .role
                .as_deref(),
            Some("manager")
        );
        let u = pb::UpdateMemberRequest {
            subject: "s".into(),
            limits: [("vms".to_owned(), 2)].into(),
            lift_limits: vec!["ram_mib".into()],
            ..Default::default()
        };
        assert_eq!(
            member_update(&u),
            json!({"limits": {"vms": 2, "ram_mib": null}})
        );
        assert_eq!(
            crate::grpc::convert::rejected(MemberUpdate::parse(&member_update(
                &pb::UpdateMemberRequest::default()
            ))),
            ["role"]
        );
    }

    #[test]
    fn invitation_requests_are_the_rest_ones() {
        let r = pb::CreateInvitationRequest {
            email: "bob@example.com".into(),
            role: "viewer".into(),
            expires_in: Some(86_400),
        };
        assert_eq!(
            invitation_create(&r),
            json!({"email": "bob@example.com", "role": "viewer", "expires_in": 86_400})
        );
        let (parsed, _) = InvitationCreate::parse(&invitation_create(&r)).unwrap();
        assert_eq!(parsed.expires_in, 86_400);
        let default = pb::CreateInvitationRequest {
            expires_in: None,
            ..r.clone()
        };
        let (parsed, _) = InvitationCreate::parse(&invitation_create(&default)).unwrap();
        assert_eq!(
            parsed.expires_in,
            meson_core::member::INVITATION_DEFAULT_EXPIRES_IN
        );
        let rejected = |r: &pb::CreateInvitationRequest| {
            crate::grpc::convert::rejected(InvitationCreate::parse(&invitation_create(r)))
        };
        assert_eq!(
            rejected(&pb::CreateInvitationRequest::default()),
            ["email", "role"]
        );
        let bad = |f: fn(&mut pb::CreateInvitationRequest)| {
            let mut b = r.clone();
            f(&mut b);
            rejected(&b)
        };
        assert_eq!(bad(|b| b.expires_in = Some(0)), ["expires_in"]);
        assert_eq!(bad(|b| b.expires_in = Some(3_599)), ["expires_in"]);
        assert_eq!(bad(|b| b.email = "a@b".into()), ["email"]);
        assert_eq!(bad(|b| b.role = "admin".into()), ["role"]);

        let token = meson_core::member::new_invitation_token();
        let a = pb::AcceptInvitationRequest {
            token: token.clone(),
        };
        assert_eq!(invitation_accept(&a), json!({ "token": token }));
        assert_eq!(
            InvitationAccept::parse(&invitation_accept(&a))
                .unwrap()
                .0
                .token,
            token
        );
        assert_eq!(
            crate::grpc::convert::rejected(InvitationAccept::parse(&invitation_accept(
                &pb::AcceptInvitationRequest::default()
            ))),
            ["token"]
        );
    }
}

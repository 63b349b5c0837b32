//! `meson.v1.MemberService` and `meson.v1.InvitationService`: an
//! organisation's members and invitations, and the caller's own
//! memberships (`app::members`). The organisation a call acts in is its
//! token's, or the one its `meson-organization` metadata names (the gate
//! reads it, as REST's `Meson-Organization` header).

use super::{Svc, answer, convert, id, note_resource, principal};
use crate::views;
use meson_core::{Error, InvitationId};
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use tonic::{Request, Response, Status};

/// A member's subject from a request field: required (REST's path always
/// has one).
fn subject(raw: &str) -> Result<&str, Error> {
    if raw.is_empty() {
        Err(Error::invalid("subject", "is required"))
    } else {
        Ok(raw)
    }
}

fn member_response(
    m: &meson_core::member::Member,
    w: &[meson_core::parse::Warning],
) -> pb::MemberResponse {
    pb::MemberResponse {
        member: Some(convert::member(views::member(m))),
        warnings: convert::warnings(w),
    }
}

#[tonic::async_trait]
impl pb::member_service_server::MemberService for Svc {
    async fn list_members(
        &self,
        req: Request<pb::ListMembersRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let members = self.0.app.member_list(&p).await?;
            Ok(pb::ListMembersResponse {
                members: members
                    .iter()
                    .map(|m| convert::member(views::member(m)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_member(
        &self,
        req: Request<pb::GetMemberRequest>,
    ) -> Result<Response<pb::Member>, Status> {
        let p = principal(&req)?;
        let r = async {
            let s = subject(&req.get_ref().subject)?;
            let m = self.0.app.member_get(&p, s).await?;
            Ok(convert::member(views::member(&m)))
        };
        answer(r.await)
    }

    async fn create_member(
        &self,
        req: Request<pb::CreateMemberRequest>,
    ) -> Result<Response<pb::MemberResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::member_create(req.get_ref());
            let (m, w) = self.0.app.member_create(&p, &body).await?;
            note_resource(&req, "member", &m.subject);
            Ok(member_response(&m, &w))
        };
        answer(r.await)
    }

    async fn update_member(
        &self,
        req: Request<pb::UpdateMemberRequest>,
    ) -> Result<Response<pb::MemberResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let s = subject(&req.get_ref().subject)?;
            note_resource(&req, "member", s);
            let body = convert::member_update(req.get_ref());
            let (m, w) = self.0.app.member_update(&p, s, &body).await?;
            Ok(member_response(&m, &w))
        };
        answer(r.await)
    }

    async fn delete_member(
        &self,
        req: Request<pb::DeleteMemberRequest>,
    ) -> Result<Response<pb::Member>, Status> {
        let p = principal(&req)?;
        let r = async {
            let s = subject(&req.get_ref().subject)?;
            note_resource(&req, "member", s);
            let m = self.0.app.member_delete(&p, s).await?;
            Ok(convert::member(views::member(&m)))
        };
        answer(r.await)
    }

    async fn list_memberships(
        &self,
        req: Request<pb::ListMembershipsRequest>,
    ) -> Result<Response<pb::ListMembershipsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let list = self.0.app.memberships(&p).await?;
            Ok(pb::ListMembershipsResponse {
                subject: p.subject.clone(),
                memberships: list
                    .into_iter()
                    .map(|(organization, role, via)| {
                        convert::membership(wire::member::Membership {
                            organization,
                            role: role.as_str().to_owned(),
                            via: via.as_str().to_owned(),
                        })
                    })
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn leave_membership(
        &self,
        req: Request<pb::LeaveMembershipRequest>,
    ) -> Result<Response<pb::Member>, Status> {
        let p = principal(&req)?;
        let r = async {
            note_resource(&req, "member", &p.subject);
            let m = self.0.app.membership_leave(&p).await?;
            Ok(convert::member(views::member(&m)))
        };
        answer(r.await)
    }
}

#[tonic::async_trait]
impl pb::invitation_service_server::InvitationService for Svc {
    async fn list_invitations(
        &self,
        req: Request<pb::ListInvitationsRequest>,
    ) -> Result<Response<pb::ListInvitationsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let list = self.0.app.invitation_list(&p).await?;
            Ok(pb::ListInvitationsResponse {
                invitations: list
                    .iter()
                    .map(|i| convert::invitation(views::invitation(i)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    async fn get_invitation(
        &self,
        req: Request<pb::GetInvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let p = principal(&req)?;
        let r = async {
            let i = self
                .0
                .app
                .invitation_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::invitation(views::invitation(&i)))
        };
        answer(r.await)
    }

    async fn create_invitation(
        &self,
        req: Request<pb::CreateInvitationRequest>,
    ) -> Result<Response<pb::CreateInvitationResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::invitation_create(req.get_ref());
            let made = self.0.app.invitation_create(&p, &body).await?;
            note_resource(&req, "invitation", made.invitation.id);
            Ok(pb::CreateInvitationResponse {
                invitation: Some(convert::invitation(views::invitation(&made.invitation))),
                token: made.token,
                warnings: convert::warnings(&made.warnings),
            })
        };
        answer(r.await)
    }

    async fn revoke_invitation(
        &self,
        req: Request<pb::RevokeInvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let p = principal(&req)?;
        let r = async {
            let invitation: InvitationId = id("id", &req.get_ref().id)?;
            note_resource(&req, "invitation", invitation);
            let i = self.0.app.invitation_delete(&p, invitation).await?;
            Ok(convert::invitation(views::invitation(&i)))
        };
        answer(r.await)
    }

    async fn accept_invitation(
        &self,
        req: Request<pb::AcceptInvitationRequest>,
    ) -> Result<Response<pb::AcceptInvitationResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let body = convert::invitation_accept(req.get_ref());
            let (i, m) = self.0.app.invitation_accept(&p, &body).await?;
            note_resource(&req, "invitation", i.id);
            Ok(pb::AcceptInvitationResponse {
                invitation: Some(convert::invitation(views::invitation(&i))),
                member: Some(convert::member(views::member(&m))),
            })
        };
        answer(r.await)
    }
}

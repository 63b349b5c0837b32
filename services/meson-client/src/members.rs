//! Organisations' members and invitations, and the caller's own
//! memberships. Every call acts in the client's organisation: its token's,
//! or the one [`Client::organization`] names.

use super::*;
use meson_types::member::{
    Invitation, InvitationAcceptRequest, InvitationAcceptResponse, InvitationCreateRequest,
    InvitationCreateResponse, InvitationList, InvitationResponse, Member, MemberCreateRequest,
    MemberList, MemberResponse, MemberUpdateRequest, MembershipList,
};

/// `/v1/members/{subject}`, the subject escaped (`auth0|5f2b8c` is
/// `auth0%7C5f2b8c`).
fn member_path(subject: &str) -> String {
    format!("/v1/members/{}", path_segment(subject))
}

impl Client {
    /// The organisation's members, owners first, then by subject.
    pub async fn member_list(&self) -> Result<Vec<Member>> {
        let r: MemberList = self.get("/v1/members").await?;
        Ok(r.members)
    }

    pub async fn member_get(&self, subject: &str) -> Result<Member> {
        let r: MemberResponse = self.get(&member_path(subject)).await?;
        Ok(r.member)
    }

    /// `POST /v1/members`: gives a subject a role, at most the caller's own
    /// (managers and owners); the member and any warnings.
    pub async fn member_create(&self, req: &MemberCreateRequest) -> Result<MemberResponse> {
        self.call(Method::POST, "/v1/members", Some(req)).await
    }

    /// `PATCH /v1/members/{subject}`: a new role; the member's and the new
    /// one at most the caller's own; the last owner keeps the role
    /// (`conflict`).
    pub async fn member_update(
        &self,
        subject: &str,
        req: &MemberUpdateRequest,
    ) -> Result<MemberResponse> {
        self.call(Method::PATCH, &member_path(subject), Some(req))
            .await
    }

    /// `DELETE /v1/members/{subject}`: the member removed; never the last
    /// owner (`conflict`).
    pub async fn member_delete(&self, subject: &str) -> Result<Member> {
        let r: MemberResponse = self
            .call(Method::DELETE, &member_path(subject), None::<&()>)
            .await?;
        Ok(r.member)
    }

    /// `GET /v1/membership`: every organisation the caller may act in (its
    /// token's first), its role there and how it holds it.
    pub async fn memberships(&self) -> Result<MembershipList> {
        self.get("/v1/membership").await
    }

    /// `DELETE /v1/membership`: the caller leaves the organisation the
    /// client acts in; the membership that ended. The last owner cannot
    /// (`conflict`).
    pub async fn membership_leave(&self) -> Result<Member> {
        let r: MemberResponse = self
            .call(Method::DELETE, "/v1/membership", None::<&()>)
            .await?;
        Ok(r.member)
    }

    /// The organisation's invitations, newest first, whatever their status
    /// (never their tokens).
    pub async fn invitation_list(&self) -> Result<Vec<Invitation>> {
        let r: InvitationList = self.get("/v1/invitations").await?;
        Ok(r.invitations)
    }

    pub async fn invitation_get(&self, id: Uuid) -> Result<Invitation> {
        let r: InvitationResponse = self.get(&format!("/v1/invitations/{id}")).await?;
        Ok(r.invitation)
    }

    /// `POST /v1/invitations`: the invitation and its token, which meson
    /// shows this once (it keeps only its hash): pass it to the invitee,
    /// who accepts it with [`Client::invitation_accept`].
    pub async fn invitation_create(
        &self,
        req: &InvitationCreateRequest,
    ) -> Result<InvitationCreateResponse> {
        self.call(Method::POST, "/v1/invitations", Some(req)).await
    }

    /// `DELETE /v1/invitations/{id}`: the invitation, revoked. One
    /// accepted, revoked or expired already is a `conflict`.
    pub async fn invitation_delete(&self, id: Uuid) -> Result<Invitation> {
        let r: InvitationResponse = self
            .call(
                Method::DELETE,
                &format!("/v1/invitations/{id}"),
                None::<&()>,
            )
            .await?;
        Ok(r.invitation)
    }

    /// `POST /v1/invitations/accept`: makes the caller (signed in with the
    /// invitation's email, verified by its identity provider) a member of
    /// the invitation's organisation.
    pub async fn invitation_accept(&self, token: &str) -> Result<InvitationAcceptResponse> {
        let req = InvitationAcceptRequest {
            token: token.trim().to_owned(),
        };
        self.call(Method::POST, "/v1/invitations/accept", Some(&req))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_one_path_segment() {
        assert_eq!(member_path("auth0|5f2b8c"), "/v1/members/auth0%7C5f2b8c");
        assert_eq!(member_path("../tokens"), "/v1/members/%2E%2E%2Ftokens");
        assert_eq!(member_path("a b?c#d"), "/v1/members/a%20b%3Fc%23d");
    }
}

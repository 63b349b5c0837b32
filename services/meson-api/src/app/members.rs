//! Organisations' members and invitations (`meson_core::member`), and the
//! caller's standing: the role a request acts with, from its token's claims
//! and its memberships.

use super::App;
use crate::auth::{Principal, Role};
use crate::authz::{Access, Rule};
use meson_core::member::{
    Invitation, InvitationAccept, InvitationCreate, Member, MemberCreate, MemberUpdate,
    new_invitation_token,
};
use meson_core::parse::Warning;
use meson_core::{Error, InvitationId, Result, TenantId};
use meson_db::scope;

/// An invitation just made, with the token to pass on.
pub struct InvitationMade {
    pub invitation: Invitation,
    pub token: String,
    pub warnings: Vec<Warning>,
}

/// How a caller holds its role in an organisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Its token's claims name the organisation.
    Token,
    /// A membership.
    Member,
    /// An owner's or manager's membership of an organisation above.
    Inherited,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Token => "token",
            Via::Member => "member",
            Via::Inherited => "inherited",
        }
    }
}

/// A role a member may hold (an operator's never is one).
fn member_role(word: &str) -> Result<Role> {
    match Role::from_claim(word) {
        Some(r) if r != Role::Admin => Ok(r),
        _ => Err(Error::internal(format!("a member has role {word:?}"))),
    }
}

/// The highest role a member of `p` may grant: its own, an operator's
/// being an owner's.
fn grantable(p: &Principal) -> Role {
    p.role.min(Role::Owner)
}

fn at_most(p: &Principal, asked: &str, field: &str) -> Result<()> {
    if member_role(asked)? > grantable(p) {
        return Err(Error::invalid(
            field,
            format!(
                "cannot grant more than the caller's own role: at most {}",
                grantable(p).as_str()
            ),
        ));
    }
    Ok(())
}

/// Whether `p` authenticated with one of meson's own API tokens (whose
/// tenant and role are the token's, whatever anyone's membership).
fn is_api_token(p: &Principal) -> bool {
    p.subject.starts_with("token:")
}

/// What a member held of its limits when a create took its lock:
/// `(limits, held)`; `None` when it has no limits of its own.
pub(crate) type MemberHold = Option<([i64; 3], [i64; 3])>;

impl App {
    /// In `tx`, before it writes a VM `p` creates: takes the member's
    /// limits lock (held until `tx` ends) when it has limits of its own.
    pub(crate) async fn hold_member(
        &self,
        tx: &mut meson_db::Tx<'_>,
        p: &Principal,
    ) -> Result<MemberHold> {
        meson_db::members::hold(tx, &p.tenant, &p.subject).await
    }

    /// In `tx`, after it wrote VM `vm`: records `p` as its creator, and
    /// refuses (`resource_limit_exceeded`, `member.vms`, ...) if it takes
    /// the member over a limit of its own.
    pub(crate) async fn within_member_limits(
        &self,
        tx: &mut meson_db::Tx<'_>,
        p: &Principal,
        vm: meson_core::VmId,
        hold: MemberHold,
    ) -> Result<()> {
        meson_db::vms::set_creator(tx, vm, &p.subject).await?;
        let Some((limits, held)) = hold else {
            return Ok(());
        };
        let over = meson_db::members::over(tx, &p.tenant, &p.subject, &limits, &held).await?;
        if over.is_empty() {
            Ok(())
        } else {
            tracing::info!(member = %p.subject, ?over, "member limit exceeded");
            Err(meson_core::member::exceeded(&limits, &held, &over))
        }
    }

    /// The caller as it acts on this request: in `asked` (an organisation
    /// named by the request's `Meson-Organization`), else in its token's,
    /// with the highest role its claims, its memberships and its owner's
    /// or manager's memberships of organisations above give it.
    /// Memberships are read only when they can matter: another
    /// organisation asked, a role below the rule's, or a `ranked` rule.
    /// A subject with no standing in the organisation it asks for is
    /// `forbidden`, whether the organisation exists or not.
    pub async fn standing(
        &self,
        p: Principal,
        asked: Option<&str>,
        rule: &Rule,
    ) -> Result<Principal> {
        let elsewhere = asked.filter(|o| *o != p.tenant.as_str());
        let below = matches!(rule.access, Access::Role(r) if r > p.role);
        if is_api_token(&p) || p.role == Role::Admin {
            // A meson token acts in its own organisation at its own role; an
            // operator's reach is its routes', not a member's.
            if let Some(org) = elsewhere {
                tracing::info!(
                    organization = org,
                    "refused: this token acts in its own organisation only"
                );
                return Err(Error::Forbidden {
                    message: format!("this token cannot act in organisation {org}"),
                });
            }
            return Ok(p);
        }
        if elsewhere.is_none() && !below && !rule.ranked {
            return Ok(p);
        }
        let org = elsewhere.unwrap_or(p.tenant.as_str()).to_owned();
        match self.role_in(&p, &org).await? {
            Some((role, _)) => Ok(Principal {
                tenant: TenantId(org),
                role,
                ..p
            }),
            None => {
                tracing::info!(organization = %org, "refused: no standing in the organisation");
                Err(Error::Forbidden {
                    message: format!("not a member of organisation {org}"),
                })
            }
        }
    }

    /// `p`'s highest role in `org` and how it holds it (`None`: none).
    async fn role_in(&self, p: &Principal, org: &str) -> Result<Option<(Role, Via)>> {
        self.breaker.check()?;
        let rungs = self
            .watched(scope::system(meson_db::members::standing(
                &self.pool, org, &p.subject,
            )))
            .await?;
        let mut best: Option<(Role, Via)> =
            (p.tenant.as_str() == org).then_some((p.role, Via::Token));
        for rung in &rungs {
            let inherited = rung.depth > 0;
            let mut consider = |role: Role, via: Via| {
                if (!inherited || role >= Role::Manager) && best.is_none_or(|(b, _)| role > b) {
                    best = Some((role, via));
                }
            };
            if let Some(word) = &rung.role {
                let via = if inherited {
                    Via::Inherited
                } else {
                    Via::Member
                };
                consider(member_role(word)?, via);
            }
            if inherited && rung.organization == p.tenant.as_str() {
                consider(p.role, Via::Inherited);
            }
        }
        Ok(best)
    }

    /// Every organisation the caller may act in, its token's first.
    pub async fn memberships(&self, p: &Principal) -> Result<Vec<(String, Role, Via)>> {
        let mut out = vec![(p.tenant.to_string(), p.role, Via::Token)];
        if is_api_token(p) {
            return Ok(out);
        }
        let rows = self
            .watched(scope::system(meson_db::members::memberships(
                &self.pool, &p.subject,
            )))
            .await?;
        for (org, word, inherited) in rows {
            let role = member_role(&word)?;
            let via = if inherited {
                Via::Inherited
            } else {
                Via::Member
            };
            match out.iter_mut().find(|(o, _, _)| *o == org) {
                Some(found) if role > found.1 => *found = (org, role, via),
                Some(_) => {}
                None => out.push((org, role, via)),
            }
        }
        // What the claims give below the token's organisation (an
        // operator's reach is its routes', not a member's).
        if (Role::Manager..=Role::Owner).contains(&p.role) {
            let below = self
                .watched(scope::system(meson_db::members::descendants(
                    &self.pool,
                    p.tenant.as_str(),
                )))
                .await?;
            for org in below {
                if !out.iter().any(|(o, _, _)| *o == org) {
                    out.push((org, p.role, Via::Inherited));
                }
            }
        }
        Ok(out)
    }

    pub async fn member_list(&self, p: &Principal) -> Result<Vec<Member>> {
        meson_db::members::list(&self.pool, &p.tenant).await
    }

    pub async fn member_get(&self, p: &Principal, subject: &str) -> Result<Member> {
        meson_db::members::get(&self.pool, &p.tenant, subject)
            .await?
            .ok_or_else(|| Error::not_found("member", subject))
    }

    /// Adds a member with a role up to the caller's own.
    pub async fn member_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(Member, Vec<Warning>)> {
        let (req, warnings) = MemberCreate::parse(body)?;
        at_most(p, &req.role, "role")?;
        let now = chrono::Utc::now();
        let m = meson_db::members::insert(
            &self.pool,
            &Member {
                tenant: p.tenant.clone(),
                subject: req.subject,
                email: req.email,
                role: req.role,
                added_by: p.subject.clone(),
                created: now,
                updated: now,
                limits: Default::default(),
            },
        )
        .await?;
        tracing::info!(member = %m.subject, role = %m.role, "member added");
        Ok((m, warnings))
    }

    /// Changes a member's role and limits (those given): both the
    /// member's role and a new one at most the caller's own; the last owner
    /// keeps the role.
    pub async fn member_update(
        &self,
        p: &Principal,
        subject: &str,
        body: &serde_json::Value,
    ) -> Result<(Member, Vec<Warning>)> {
        let (req, warnings) = MemberUpdate::parse(body)?;
        if let Some(role) = &req.role {
            at_most(p, role, "role")?;
        }
        let (before, after) = meson_db::members::update(
            &self.pool,
            &p.tenant,
            subject,
            req.role.as_deref(),
            &req.limits,
            grantable(p).as_str(),
        )
        .await?
        .ok_or_else(|| Error::not_found("member", subject))?;
        tracing::info!(member = %subject, from = %before.role, to = %after.role,
            limits = ?after.limits, "member changed");
        Ok((after, warnings))
    }

    /// Removes a member ranked at most the caller; never the last owner.
    pub async fn member_delete(&self, p: &Principal, subject: &str) -> Result<Member> {
        let gone = meson_db::members::delete(&self.pool, &p.tenant, subject, grantable(p).as_str())
            .await?
            .ok_or_else(|| Error::not_found("member", subject))?;
        tracing::info!(member = %subject, "member removed");
        Ok(gone)
    }

    /// The caller leaves its organisation (the one it acts in): its
    /// membership there ends; the last owner cannot leave.
    pub async fn membership_leave(&self, p: &Principal) -> Result<Member> {
        let gone = meson_db::members::delete(&self.pool, &p.tenant, &p.subject, "owner")
            .await?
            .ok_or_else(|| {
                Error::not_found("membership", format!("{} in {}", p.subject, p.tenant))
            })?;
        tracing::info!(member = %p.subject, "member left");
        Ok(gone)
    }

    /// An invitation for an email address, with a role up to the caller's
    /// own; its token is returned once, to pass on.
    pub async fn invitation_create(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<InvitationMade> {
        let (req, warnings) = InvitationCreate::parse(body)?;
        at_most(p, &req.role, "role")?;
        let token = new_invitation_token();
        let now = chrono::Utc::now();
        let invitation = meson_db::members::invitation_insert(
            &self.pool,
            &Invitation {
                id: InvitationId::new(),
                tenant: p.tenant.clone(),
                email: req.email,
                role: req.role,
                invited_by: p.subject.clone(),
                created: now,
                expires: now,
                accepted: None,
                accepted_by: None,
                revoked: None,
                revoked_by: None,
            },
            &super::secret_hash(&token),
            req.expires_in,
        )
        .await?;
        tracing::info!(invitation = %invitation.id, role = %invitation.role, "invitation made");
        Ok(InvitationMade {
            invitation,
            token,
            warnings,
        })
    }

    pub async fn invitation_list(&self, p: &Principal) -> Result<Vec<Invitation>> {
        meson_db::members::invitation_list(&self.pool, &p.tenant).await
    }

    pub async fn invitation_get(&self, p: &Principal, id: InvitationId) -> Result<Invitation> {
        meson_db::members::invitation_get(&self.pool, &p.tenant, id)
            .await?
            .ok_or_else(|| Error::not_found("invitation", id))
    }

    /// Revokes an open invitation; a closed one is a `conflict`.
    pub async fn invitation_delete(&self, p: &Principal, id: InvitationId) -> Result<Invitation> {
        match meson_db::members::invitation_revoke(&self.pool, &p.tenant, id, &p.subject).await? {
            Some(i) => Ok(i),
            None => {
                let i = self.invitation_get(p, id).await?;
                Err(Error::Conflict {
                    message: format!(
                        "invitation {id} is {} already",
                        i.status(chrono::Utc::now()).as_str()
                    ),
                })
            }
        }
    }

    /// Accepts an invitation as the caller: only a subject whose verified
    /// email is the invitation's may, and it becomes a member of the
    /// invitation's organisation (whatever its token's).
    pub async fn invitation_accept(
        &self,
        p: &Principal,
        body: &serde_json::Value,
    ) -> Result<(Invitation, Member)> {
        let (req, _) = InvitationAccept::parse(body)?;
        if is_api_token(p) {
            return Err(Error::Forbidden {
                message: "an invitation is accepted by a person signed in, not an API token"
                    .to_owned(),
            });
        }
        let Some(email) = &p.email else {
            return Err(Error::Forbidden {
                message: "accepting an invitation needs a token with a verified email".to_owned(),
            });
        };
        // Whose organisation it is, the token says: the system scope, and
        // the token is the wall.
        let (invitation, member) = scope::system(meson_db::members::invitation_accept(
            &self.pool,
            &super::secret_hash(&req.token),
            &p.subject,
            email,
        ))
        .await?;
        tracing::info!(invitation = %invitation.id, organization = %invitation.tenant,
            "invitation accepted");
        Ok((invitation, member))
    }
}

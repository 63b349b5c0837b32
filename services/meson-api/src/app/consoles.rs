//! Consoles: a VM's screen over VNC through meson (`meson_core::console`).
//! Requesting one hands out its URL and password; connecting to it uses it
//! up ([`App::console_claim`]); the relay itself is `crate::console`'s.

use super::App;
use crate::auth::Principal;
use meson_core::console::{Console, ConsoleStatus, REQUEST_TTL, Secrets, websocket_url};
use meson_core::target::Target;
use meson_core::vm::{Vm, VmStatus};
use meson_core::{ConsoleId, Error, Result, VmId};
use meson_db::consoles::Claim;

/// The most consoles a list answers, and how many when not told.
pub const MAX_LIST: i64 = 100;
pub const DEFAULT_LIST: i64 = 50;

/// Which consoles a list answers: of a VM, with one of some statuses, how
/// many (the REST query's `vm`, `status` and `limit`, gRPC's alike).
#[derive(Debug, PartialEq)]
pub struct ConsoleQuery {
    pub vm: Option<VmId>,
    pub statuses: Vec<ConsoleStatus>,
    pub limit: i64,
}

impl ConsoleQuery {
    /// Reads the filters, each status possibly comma-separated; a bad one
    /// is named `vm`, `status` or `limit`.
    pub fn parse<'a>(
        vm: Option<&str>,
        statuses: impl IntoIterator<Item = &'a str>,
        limit: Option<&str>,
    ) -> Result<ConsoleQuery> {
        let vm = vm.map(|v| super::list::id::<VmId>("vm", v)).transpose()?;
        let mut parsed = Vec::new();
        for s in statuses
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            parsed.push(ConsoleStatus::parse(s).ok_or_else(|| {
                Error::invalid(
                    "status",
                    format!(
                        "{s:?} is no console status: requested, open, closed, expired or revoked"
                    ),
                )
            })?);
        }
        let limit = match limit {
            None => DEFAULT_LIST,
            Some(n) => n
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_LIST).contains(n))
                .ok_or_else(|| Error::invalid("limit", "must be an integer from 1 to 100"))?,
        };
        Ok(ConsoleQuery {
            vm,
            statuses: parsed,
            limit,
        })
    }
}

/// A console just requested, with its secrets (shown this once).
pub struct ConsoleRequested {
    pub console: Console,
    /// The WebSocket URL, with its one-time token.
    pub url: String,
    /// The VNC password.
    pub password: String,
}

/// A console a connection has just used up: what its relay needs.
pub struct Claimed {
    pub console: Console,
    pub password: String,
    pub vm: Vm,
    pub target: Target,
}

impl App {
    /// A console on VM `id`'s screen, for a connection to `base_url`'s
    /// WebSocket within [`REQUEST_TTL`]. The VM must be running.
    pub async fn vm_request_console(
        &self,
        p: &Principal,
        id: VmId,
        base_url: &str,
    ) -> Result<ConsoleRequested> {
        let vm = meson_db::vms::get(&self.pool, &p.tenant, id).await?;
        if vm.status != VmStatus::Running || vm.placement.is_none() {
            return Err(Error::Conflict {
                message: format!(
                    "VM {} is {}: a console shows a running VM's screen; start it first",
                    vm.name,
                    vm.status.as_str()
                ),
            });
        }
        let secrets = Secrets::generate();
        let console = Console {
            id: ConsoleId::new(),
            tenant: p.tenant.clone(),
            vm_id: id,
            subject: p.subject.clone(),
            role: p.role.as_str().to_owned(),
            status: ConsoleStatus::Requested,
            created: chrono::Utc::now(),
            expires: chrono::Utc::now(),
            opened: None,
            seen: None,
            closed: None,
            close_reason: None,
            bytes_in: 0,
            bytes_out: 0,
        };
        let console = meson_db::consoles::insert(
            &self.pool,
            &console,
            &super::secret_hash(&secrets.token),
            &secrets.password,
            REQUEST_TTL,
        )
        .await?;
        tracing::info!(vm = %id, console = %console.id, "console requested");
        Ok(ConsoleRequested {
            url: websocket_url(base_url, console.id, &secrets.token),
            password: secrets.password,
            console,
        })
    }

    pub async fn console_get(&self, _p: &Principal, id: ConsoleId) -> Result<Console> {
        meson_db::consoles::get(&self.pool, id)
            .await?
            .ok_or_else(|| Error::not_found("console", id))
    }

    /// The newest consoles `q` keeps.
    pub async fn console_list(&self, _p: &Principal, q: &ConsoleQuery) -> Result<Vec<Console>> {
        let statuses: Vec<String> = q.statuses.iter().map(|s| s.as_str().to_owned()).collect();
        meson_db::consoles::list(&self.pool, q.vm, &statuses, q.limit.clamp(1, MAX_LIST)).await
    }

    /// Ends a console: one not used yet can no longer be, an open session
    /// is closed by its relay within a heartbeat. One ended already is a
    /// `conflict`.
    pub async fn console_delete(&self, p: &Principal, id: ConsoleId) -> Result<Console> {
        let reason = format!("ended by {}", p.subject);
        if !meson_db::consoles::end(&self.pool, id, &reason).await? {
            let c = self.console_get(p, id).await?;
            return Err(Error::Conflict {
                message: format!("console {id} is {} already", c.status.as_str()),
            });
        }
        self.console_get(p, id).await
    }

    /// Fails with `not_found` unless console `id` is `caller`'s tenant's
    /// (a connection that sent a bearer token: it must be of the
    /// console's tenant), before anything about the connection is read.
    pub async fn console_of(&self, id: ConsoleId, caller: &Principal) -> Result<()> {
        let found = meson_db::scope::system(meson_db::consoles::get(&self.pool, id)).await?;
        match found {
            Some(c) if c.tenant == caller.tenant => Ok(()),
            _ => Err(Error::not_found("console", id)),
        }
    }

    /// Uses console `id` up for a connection holding `token`. Unknown or
    /// the wrong token: `not_found`; used, expired or revoked: `conflict`;
    /// its VM no longer running (or placed): `conflict`, and the console
    /// is closed.
    pub async fn console_claim(&self, id: ConsoleId, token: &str) -> Result<Claimed> {
        let hash = super::secret_hash(token);
        // Which tenant's it is is not known before its token is checked:
        // the lookup runs in the system scope, and the token is the wall.
        let found =
            meson_db::scope::system(meson_db::consoles::claim(&self.pool, id, &hash)).await?;
        let (console, password) = match found {
            Claim::Unknown => return Err(Error::not_found("console", id)),
            Claim::Spent(c) => {
                return Err(Error::Conflict {
                    message: format!(
                        "console {id} is {}: a console serves one connection, within {} s of \
                         its request; request another",
                        c.status.as_str(),
                        REQUEST_TTL.as_secs()
                    ),
                });
            }
            Claim::Won { console, password } => (console, password),
        };
        let scope = meson_db::scope::Scope::Tenant(console.tenant.clone());
        let vm = meson_db::scope::run(scope, async {
            let vm = meson_db::vms::get(&self.pool, &console.tenant, console.vm_id).await?;
            let target = match vm.placement.as_ref() {
                Some(placed) if vm.status == VmStatus::Running => {
                    meson_db::targets::get(&self.pool, placed.target_id).await?
                }
                _ => {
                    return Err(Error::Conflict {
                        message: format!(
                            "VM {} is {}: its console shows nothing until it runs again",
                            vm.name,
                            vm.status.as_str()
                        ),
                    });
                }
            };
            Ok((vm, target))
        })
        .await;
        match vm {
            Ok((vm, target)) => Ok(Claimed {
                console,
                password,
                vm,
                target,
            }),
            Err(e) => {
                let reason = e.public_message();
                meson_db::scope::system(meson_db::consoles::close(&self.pool, id, &reason, 0, 0))
                    .await?;
                Err(e)
            }
        }
    }
}

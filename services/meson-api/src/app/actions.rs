//! Actions: read one, or many by id.

use super::App;
use crate::auth::{Principal, Role};
use meson_core::action::{Action, ActionStatus};
use meson_core::{ActionId, Error, Result};

/// Hetzner's limit: more ids per request may be silently dropped there; here they are refused.
pub const MAX_IDS: usize = 25;

impl App {
    pub async fn action_get(&self, p: &Principal, id: ActionId) -> Result<Action> {
        p.require(Role::Viewer)?;
        meson_db::actions::get(&self.pool, Some(&p.tenant), id).await
    }

    pub async fn action_list(
        &self,
        p: &Principal,
        ids: &[ActionId],
        status: &[ActionStatus],
    ) -> Result<Vec<Action>> {
        p.require(Role::Viewer)?;
        if ids.is_empty() {
            return Err(Error::invalid(
                "id",
                "at least one id is required, e.g. ?id=<action id>",
            ));
        }
        if ids.len() > MAX_IDS {
            return Err(Error::invalid(
                "id",
                format!("at most {MAX_IDS} ids per request"),
            ));
        }
        let actions = meson_db::actions::get_many(&self.pool, Some(&p.tenant), ids).await?;
        Ok(actions
            .into_iter()
            .filter(|a| status.is_empty() || status.contains(&a.status))
            .collect())
    }
}

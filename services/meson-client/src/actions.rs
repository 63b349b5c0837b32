//! Actions: read them, a resource's history, and their live stream.

use super::*;

impl Client {
    pub async fn action_get(&self, id: Uuid) -> Result<wire::Action> {
        let r: wire::ActionResponse = self.get(&format!("/v1/actions/{id}")).await?;
        Ok(r.action)
    }

    /// Actions by id (at most 25); unknown ids are left out.
    pub async fn actions_get(&self, ids: &[Uuid]) -> Result<Vec<wire::Action>> {
        let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
        let r: wire::ActionList = self
            .get(&format!("/v1/actions?{}&sort=id", query.join("&")))
            .await?;
        Ok(r.actions)
    }

    /// The caller's actions whose ids start or end with `abbrev` (8 or more
    /// hex digits), in id order: one when the abbreviation is unique.
    pub async fn actions_get_abbreviated(&self, abbrev: &str) -> Result<Vec<wire::Action>> {
        let q = serde_urlencoded::to_string([("id", abbrev), ("sort", "id")]).unwrap_or_default();
        let r: wire::ActionList = self.get(&format!("/v1/actions?{q}")).await?;
        Ok(r.actions)
    }

    /// A resource's actions, newest first: `kind` is the collection
    /// (`vms`, `volumes`, `networks`, `clusters`).
    pub async fn resource_actions(&self, kind: &str, id: Uuid) -> Result<Vec<wire::Action>> {
        let r: wire::action::ActionPage = self
            .get(&format!("/v1/{kind}/{id}/actions?per_page=50"))
            .await?;
        Ok(r.actions)
    }

    /// `GET /v1/actions/stream` for `ids`, as a response to read events from.
    pub(crate) async fn stream(&self, ids: &[Uuid]) -> Result<reqwest::Response> {
        let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
        let res = self
            .request(
                Method::GET,
                self.url(&format!("/v1/actions/stream?{}", query.join("&"))),
            )?
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(Error::Transport)?;
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(api_error(res).await)
        }
    }
}

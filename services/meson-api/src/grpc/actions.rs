//! `meson.v1.ActionService`, and every resource's action list.

use super::{Svc, answer, convert, id, principal};
use crate::app::{ActionQuery, list};
use crate::auth::Principal;
use crate::state::AppState;
use crate::views;
use futures::Stream;
use meson_core::Error;
use meson_core::action::ResourceType;
use meson_proto::meson::v1 as pb;
use std::pin::Pin;
use tonic::{Request, Response, Status};

/// The query pairs of an action list (`id`, `status`, `sort`).
fn pairs(ids: &[String], status: &[String], sort: &[String]) -> Vec<(String, String)> {
    let kv = |k: &str, vs: &[String]| {
        vs.iter()
            .map(|v| (k.to_owned(), v.clone()))
            .collect::<Vec<_>>()
    };
    [kv("id", ids), kv("status", status), kv("sort", sort)].concat()
}

/// A resource's actions (the REST `GET /v1/{collection}/{id}/actions`).
pub(super) async fn list_for(
    s: &AppState,
    p: &Principal,
    kind: ResourceType,
    r: &pb::ResourceActionsRequest,
) -> Result<pb::ResourceActionsResponse, Error> {
    let resource: uuid::Uuid = id("id", &r.id)?;
    let mut q = pairs(&[], &r.status, &r.sort);
    convert::page_query(r.page.as_ref(), &mut q);
    let f = ActionQuery::parse(&q)?;
    let page = list::parse_page(&q)?;
    let res = s
        .app
        .action_list_for(p, kind, resource, &f.status, &f.sort, &page)
        .await?;
    Ok(pb::ResourceActionsResponse {
        actions: res
            .actions
            .iter()
            .map(|a| convert::action(views::action(a)))
            .collect(),
        pagination: Some(convert::pagination(page.pagination(res.total))),
    })
}

impl Svc {
    /// Any resource's `List…Actions`.
    pub(crate) async fn resource_actions(
        &self,
        req: &Request<pb::ResourceActionsRequest>,
        kind: ResourceType,
    ) -> Result<Response<pb::ResourceActionsResponse>, Status> {
        let p = principal(req)?;
        answer(list_for(&self.0, &p, kind, req.get_ref()).await)
    }
}

type ActionStream = Pin<Box<dyn Stream<Item = Result<pb::Action, Status>> + Send>>;

#[tonic::async_trait]
impl pb::action_service_server::ActionService for Svc {
    async fn get_action(
        &self,
        req: Request<pb::GetActionRequest>,
    ) -> Result<Response<pb::Action>, Status> {
        let p = principal(&req)?;
        let r = async {
            let a = self
                .0
                .app
                .action_get(&p, id("id", &req.get_ref().id)?)
                .await?;
            Ok(convert::action(views::action(&a)))
        };
        answer(r.await)
    }

    async fn list_actions(
        &self,
        req: Request<pb::ListActionsRequest>,
    ) -> Result<Response<pb::ListActionsResponse>, Status> {
        let p = principal(&req)?;
        let r = async {
            let m = req.get_ref();
            let f = ActionQuery::parse(&pairs(&m.id, &m.status, &m.sort))?;
            let actions = self
                .0
                .app
                .action_list(&p, &f.ids, &f.status, &f.sort)
                .await?;
            Ok(pb::ListActionsResponse {
                actions: actions
                    .iter()
                    .map(|a| convert::action(views::action(a)))
                    .collect(),
            })
        };
        answer(r.await)
    }

    type WatchActionsStream = ActionStream;

    /// Like `GET /v1/actions/stream`: the current states, then each change
    /// in commit order, until every watched action is final; an error ends
    /// the stream with its status. The stream also ends when the server
    /// shuts down.
    async fn watch_actions(
        &self,
        req: Request<pb::WatchActionsRequest>,
    ) -> Result<Response<ActionStream>, Status> {
        let p = principal(&req)?;
        let ids = req
            .get_ref()
            .id
            .iter()
            .map(|raw| id("id", raw))
            .collect::<Result<Vec<meson_core::ActionId>, Error>>()
            .map_err(|e| super::status::status_of(&e))?;
        // Subscribe before the current states are read: nothing falls between.
        let notices = self
            .0
            .actions
            .subscribe()
            .await
            .map_err(|e| super::status::status_of(&e))?;
        let watch = self
            .0
            .app
            .action_watch(&p, &ids, notices, None)
            .await
            .map_err(|e| super::status::status_of(&e))?;
        let stop = self.0.actions.shutdown_signal();
        let stream = futures::stream::unfold(Some((watch, stop)), |state| async move {
            let (mut watch, mut stop) = state?;
            let next = tokio::select! {
                _ = stop.wait_for(|s| *s) => return None,
                next = watch.next() => next,
            };
            match next {
                Ok(Some(a)) => Some((Ok(convert::action(views::action(&a))), Some((watch, stop)))),
                Ok(None) => None,
                Err(e) => Some((Err(super::status::status_of(&e)), None)),
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

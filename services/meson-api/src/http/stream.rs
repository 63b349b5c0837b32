//! Live action events: the process's action feed and `GET /v1/actions/stream` (Server-Sent Events).

use super::{AppState, parse_id, query_pairs};
use crate::App;
use crate::auth::Principal;
use crate::error::{ApiResult, body_of, status_of};
use crate::views;
use axum::extract::{RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use meson_core::action::Action;
use meson_core::{ActionId, Error};
use meson_db::actions::ActionNotice;
use meson_types::ErrorResponse;
use meson_types::requests::ActionStreamQuery;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Notices the feed holds for a stream that falls behind. Beyond that the
/// stream lags: it re-reads its actions from the database and carries on.
const FEED_CAPACITY: usize = 1024;

/// Proxies and load balancers close connections that stay silent for long.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Every action change this process hears, for its streams to pick from.
///
/// One PostgreSQL listener per process feeds every stream, so watchers cost
/// no database work beyond their first read, however many there are. The
/// listener is registered as watching only while streams are open (changes
/// are announced only then: see `meson_db::actions::ActionListener`).
#[derive(Clone)]
pub struct ActionFeed {
    notices: broadcast::Sender<Arc<ActionNotice>>,
    shutdown: watch::Receiver<bool>,
    watching: mpsc::Sender<oneshot::Sender<Result<(), Error>>>,
}

impl ActionFeed {
    /// A receiver of every notice from now on. Once this returns, every
    /// change committed from then on is announced: read the states the
    /// receiver will update only after it.
    pub async fn subscribe(&self) -> Result<broadcast::Receiver<Arc<ActionNotice>>, Error> {
        let notices = self.notices.subscribe();
        let unavailable = || Error::Unavailable {
            message: "the action feed has stopped".into(),
        };
        let (reply, registered) = oneshot::channel();
        self.watching.send(reply).await.map_err(|_| unavailable())?;
        registered.await.map_err(|_| unavailable())??;
        Ok(notices)
    }

    /// Turns true when the server shuts down: open streams end.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// Starts the listener task. It and every open stream end once
    /// `shutdown` turns true: a graceful shutdown waits for open responses,
    /// and a stream could otherwise keep the process up for as long as its
    /// actions run.
    pub fn start(app: &App, shutdown: watch::Receiver<bool>) -> ActionFeed {
        let (notices, _) = broadcast::channel(FEED_CAPACITY);
        let (watching, requests) = mpsc::channel(FEED_CAPACITY);
        let (app, feed, stop) = (app.clone(), notices.clone(), shutdown.clone());
        tokio::spawn(async move { app.action_feed_run(feed, requests, stop).await });
        ActionFeed {
            notices,
            shutdown,
            watching,
        }
    }
}

/// `GET /v1/actions/stream?id=..`: an `action` event with each watched
/// action's current state, then one per change in commit order; the stream
/// ends after every watched action's final state.
#[utoipa::path(
    get,
    path = "/v1/actions/stream",
    tag = "actions",
    operation_id = "action_stream",
    summary = "Stream actions as they change",
    description = "Server-Sent Events: first an `action` event with each watched action's \
        current state, then one per change, in commit order; the stream ends once every \
        watched action is finished. An `error` event (data: the error envelope) ends it \
        early. Comments keep the connection alive every 15 seconds. Each event's `id` says \
        what the client has been sent; a client reconnecting to the same ids with it as \
        `Last-Event-ID` (browsers' EventSource does) gets no state again that it has: only \
        the newer ones, and the end once all it has is final. An id that does not fit \
        the ids is ignored.",
    params(
        ActionStreamQuery,
        ("Last-Event-ID" = Option<String>, Header,
            description = "The id of the last event received, to resume a stream."),
    ),
    responses(
        (status = 200, description = "The event stream: `event: action` (data: an `Action`) \
            and `event: error` (data: an `ErrorResponse`).",
            content_type = "text/event-stream", body = meson_types::action::ActionStreamEvent),
        (status = 204, description = "Resumed (`Last-Event-ID`) by a client that has every \
            watched action's final state: nothing more will come, and EventSource stops \
            reconnecting."),
        (status = 400, description = "No id, more than 25, or a malformed one \
            (`invalid_input`).", body = ErrorResponse),
        (status = 404, description = "One of the actions does not exist for this tenant \
            (`not_found`).", body = ErrorResponse),
    ),
)]
pub(super) async fn actions(
    State(s): State<AppState>,
    p: Principal,
    headers: axum::http::HeaderMap,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let mut ids: Vec<ActionId> = Vec::new();
    for (k, v) in query_pairs(q.as_deref())? {
        if k == "id" {
            ids.push(parse_id(&v)?);
        }
    }
    // Subscribe before the current states are read (`action_watch` reads them),
    // so that no change can fall between the read and the first notice.
    let notices = s.actions.subscribe().await?;
    // A reconnecting client names what it has: not sent again.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let watch = s
        .app
        .action_watch(&p, &ids, notices, resume.as_deref())
        .await?;
    if watch.finished() {
        // Nothing left to send, ever: SSE clients stop reconnecting on 204.
        return Ok(axum::http::StatusCode::NO_CONTENT.into_response());
    }
    let events = futures::stream::unfold(
        Some((watch, s.actions.shutdown.clone())),
        |state| async move {
            let (mut watch, mut stop) = state?;
            let next = tokio::select! {
                // A dropped sender means the server is gone too.
                _ = stop.wait_for(|stop| *stop) => return None,
                next = watch.next() => next,
            };
            match next {
                Ok(Some(a)) => {
                    let event = action_event(&a).id(watch.position());
                    Some((Ok::<_, Infallible>(event), Some((watch, stop))))
                }
                Ok(None) => None,
                // Too late for an HTTP status: say why in the stream, then end it.
                Err(e) => Some((Ok(error_event(&e)), None)),
            }
        },
    );
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// `event: action`, the action as `GET /v1/actions/{id}` shows it.
fn action_event(a: &Action) -> Event {
    Event::default()
        .event("action")
        .json_data(views::action(a))
        .unwrap_or_else(|e| error_event(&Error::internal_from("encoding an action event", e)))
}

/// `event: error`, the error body every failed request carries.
fn error_event(e: &Error) -> Event {
    if status_of(e).is_server_error() {
        tracing::error!(error = %e, source = ?std::error::Error::source(e), "action stream failed");
    }
    Event::default()
        .event("error")
        .json_data(body_of(e))
        .unwrap_or_else(|_| Event::default().event("error"))
}

//! Actions over HTTP: lists by id, a VM's actions, and the live stream.

use crate::harness::{Meson, seed_vm};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// Creates a VM named `name`; returns its id and its create action's id.
async fn create_vm(m: &Meson, name: &str) -> (String, String) {
    let mut body = seed_vm();
    body["specs"]["vm_name"] = json!(name);
    let r = m.post("/v1/vms", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    (
        r.body["vm"]["id"].as_str().expect("vm id").to_owned(),
        r.body["action"]["id"]
            .as_str()
            .expect("action id")
            .to_owned(),
    )
}

/// The ids of a list's actions, in order.
fn ids(body: &Value) -> Vec<String> {
    body["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("no actions in {body}"))
        .iter()
        .map(|a| a["id"].as_str().expect("id").to_owned())
        .collect()
}

/// The field an `invalid_input` error names first.
fn invalid_field(r: &crate::harness::Reply) -> String {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "invalid_input", "{}", r.body);
    r.body["error"]["details"]["fields"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Polls until the action reaches `progress` (bounded).
async fn wait_progress(m: &Meson, id: &str, progress: u64) {
    for _ in 0..600 {
        let r = m.get(&format!("/v1/actions/{id}")).await;
        if r.body["action"]["progress"] == progress {
            return;
        }
        assert_eq!(r.body["action"]["status"], "running", "{}", r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("action {id} never reached {progress}%");
}

#[tokio::test]
async fn actions_by_id_filter_sort_and_validate() {
    let m = Meson::start().await;
    // One action that fails, one that succeeds, one left running.
    for h in m.sim().hosts() {
        h.faults().fail_next("vm/register", 400, 1);
    }
    let (_, failed) = create_vm(&m, "one").await;
    assert_eq!(m.wait_action(&failed).await["status"], "error");
    for h in m.sim().hosts() {
        h.faults().clear();
    }
    let (_, done) = create_vm(&m, "two").await;
    assert_eq!(m.wait_action(&done).await["status"], "success");
    m.set_boot_time(Duration::from_secs(60));
    let (_, running) = create_vm(&m, "three").await;
    let (f, d, r) = (failed.as_str(), done.as_str(), running.as_str());
    let all = format!("/v1/actions?id={f}&id={d}&id={r}");

    let list = m.get(&all).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(ids(&list.body), [f, d, r], "id order by default");
    assert_eq!(list.body["actions"][1]["status"], "success");
    assert_eq!(list.body["actions"][1]["progress"], 100);
    let unknown = uuid::Uuid::now_v7();
    let with_unknown = m.get(&format!("{all}&id={unknown}")).await;
    assert_eq!(
        ids(&with_unknown.body),
        [f, d, r],
        "unknown ids are skipped"
    );

    let only = |q: &str| format!("{all}&{q}");
    assert_eq!(ids(&m.get(&only("status=success")).await.body), [d]);
    assert_eq!(
        ids(&m.get(&only("status=error&status=running")).await.body),
        [f, r]
    );
    assert_eq!(ids(&m.get(&only("sort=status")).await.body), [f, r, d]);
    assert_eq!(ids(&m.get(&only("sort=status:desc")).await.body), [d, r, f]);
    assert_eq!(ids(&m.get(&only("sort=id:desc")).await.body), [r, d, f]);
    assert_eq!(
        ids(&m.get(&only("sort=command&sort=started:desc")).await.body),
        [r, d, f],
        "ties on the first key are ordered by the second"
    );
    assert_eq!(
        ids(&m
            .get(&only("status=running&status=success&sort=id:desc"))
            .await
            .body),
        [r, d]
    );

    // Validation: every rejection names the parameter at fault.
    assert_eq!(invalid_field(&m.get("/v1/actions").await), "id");
    assert_eq!(
        invalid_field(&m.get("/v1/actions?status=success").await),
        "id"
    );
    let too_many: Vec<String> = (0..26)
        .map(|_| format!("id={}", uuid::Uuid::now_v7()))
        .collect();
    let r26 = m.get(&format!("/v1/actions?{}", too_many.join("&"))).await;
    assert_eq!(invalid_field(&r26), "id");
    let r25 = m
        .get(&format!("/v1/actions?{}", too_many[..25].join("&")))
        .await;
    assert_eq!(r25.status, StatusCode::OK, "25 ids are fine: {}", r25.body);
    assert_eq!(invalid_field(&m.get(&only("sort=name")).await), "sort");
    assert_eq!(
        invalid_field(&m.get(&only("sort=id:sideways")).await),
        "sort"
    );
    assert_eq!(invalid_field(&m.get(&only("status=done")).await), "status");
    assert_eq!(invalid_field(&m.get("/v1/actions?id=nope").await), "id");

    m.set_boot_time(Duration::from_millis(50));
    assert_eq!(m.wait_action(r).await["status"], "success");
    m.stop().await;
}

#[tokio::test]
async fn a_vms_actions_are_listed_newest_first_with_pagination() {
    let m = Meson::start().await;
    let (vm, create) = create_vm(&m, "test").await;
    assert_eq!(m.wait_action(&create).await["status"], "success");
    let r = m.delete(&format!("/v1/vms/{vm}")).await;
    let delete = r.body["action"]["id"].as_str().expect("id").to_owned();
    assert_eq!(m.wait_action(&delete).await["status"], "success");
    // The VM is gone, its history is not.
    assert_eq!(
        m.get(&format!("/v1/vms/{vm}")).await.status,
        StatusCode::NOT_FOUND
    );
    let path = format!("/v1/vms/{vm}/actions");

    let r = m.get(&path).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        ids(&r.body),
        [delete.as_str(), create.as_str()],
        "newest first"
    );
    assert_eq!(r.body["actions"][0]["command"], "delete_vm");
    assert_eq!(r.body["actions"][1]["command"], "create_vm");
    let p = &r.body["meta"]["pagination"];
    assert_eq!(
        (p["total_entries"].as_u64(), p["last_page"].as_u64()),
        (Some(2), Some(1))
    );

    let r = m.get(&format!("{path}?sort=started:asc")).await;
    assert_eq!(ids(&r.body), [create.as_str(), delete.as_str()]);
    let r = m.get(&format!("{path}?sort=command:desc")).await;
    assert_eq!(ids(&r.body), [delete.as_str(), create.as_str()]);

    let r = m.get(&format!("{path}?per_page=1")).await;
    assert_eq!(ids(&r.body), [delete.as_str()]);
    assert_eq!(r.body["meta"]["pagination"]["next_page"], 2);
    let link = r.headers["link"].to_str().expect("link");
    assert!(
        link.contains(&format!("<{path}?page=2&per_page=1>; rel=\"next\"")),
        "{link}"
    );
    let r = m.get(&format!("{path}?page=2&per_page=1")).await;
    assert_eq!(ids(&r.body), [create.as_str()]);
    assert_eq!(r.body["meta"]["pagination"]["previous_page"], 1);

    let r = m.get(&format!("{path}?status=running")).await;
    assert_eq!(ids(&r.body), Vec::<String>::new());
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 0);
    assert_eq!(
        ids(&m.get(&format!("{path}?status=success")).await.body).len(),
        2
    );

    assert_eq!(
        invalid_field(&m.get(&format!("{path}?sort=vm")).await),
        "sort"
    );
    assert_eq!(
        invalid_field(&m.get(&format!("{path}?per_page=0")).await),
        "per_page"
    );
    assert_eq!(invalid_field(&m.get("/v1/vms/nope/actions").await), "id");
    let r = m
        .get(&format!("/v1/vms/{}/actions", uuid::Uuid::now_v7()))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "not_found");
    m.stop().await;
}

/// One Server-Sent Event.
#[derive(Debug)]
struct SseEvent {
    event: String,
    data: Value,
    /// Its `id:` field.
    id: Option<String>,
}

/// Reads Server-Sent Events off a response, frame by frame.
struct SseReader {
    res: reqwest::Response,
    buf: Vec<u8>,
}

impl SseReader {
    async fn open(m: &Meson, ids: &[&str]) -> SseReader {
        let res = Self::request(m, ids, None).await;
        Self::reading(res)
    }

    /// The stream of `ids`, resumed from the event `last_event_id` (the
    /// answer as it is: a 204 once there is nothing more).
    async fn request(m: &Meson, ids: &[&str], last_event_id: Option<&str>) -> reqwest::Response {
        let query: Vec<String> = ids.iter().map(|id| format!("id={id}")).collect();
        let mut req = m
            .http
            .get(format!("{}/v1/actions/stream?{}", m.base, query.join("&")))
            .bearer_auth(&m.token);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        req.send().await.expect("stream opens")
    }

    fn reading(res: reqwest::Response) -> SseReader {
        assert_eq!(res.status(), StatusCode::OK);
        let ct = res.headers()["content-type"].to_str().expect("ascii");
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        SseReader {
            res,
            buf: Vec::new(),
        }
    }

    /// The next event; `None` once the server has ended the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.buf.drain(..end + 2).collect();
                let frame = String::from_utf8(frame).expect("utf-8 frame");
                let (mut event, mut data, mut id) = (None, Vec::new(), None);
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                    // Lines starting with ':' are comments (keep-alives).
                }
                if let Some(event) = event {
                    let data = serde_json::from_str(&data.join("\n")).expect("json data");
                    return Some(SseEvent { event, data, id });
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.res.chunk())
                .await
                .expect("an event or the end within 30 s")
                .expect("reading the stream");
            match chunk {
                Some(bytes) => self.buf.extend_from_slice(&bytes),
                None => {
                    assert!(self.buf.is_empty(), "a truncated frame: {:?}", self.buf);
                    return None;
                }
            }
        }
    }

    /// Every remaining event, all of them `action` events.
    async fn actions(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            assert_eq!(e.event, "action", "{e:?}");
            out.push(e.data);
        }
        out
    }
}

fn progress_of(events: &[Value], id: &str) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["id"] == id)
        .map(|e| e["progress"].as_u64().expect("progress"))
        .collect()
}

#[tokio::test]
async fn the_stream_pushes_each_change_until_the_actions_are_final() {
    let m = Meson::start().await;
    let (_, earlier) = create_vm(&m, "one").await;
    assert_eq!(m.wait_action(&earlier).await["status"], "success");
    // A boot that takes a while, so that the stream has steps to watch.
    m.set_boot_time(Duration::from_millis(300));
    let (_, create) = create_vm(&m, "two").await;

    let mut stream = SseReader::open(&m, &[&create, &earlier]).await;
    let events = stream.actions().await;
    // First the current state of each action, in the order asked for.
    assert_eq!(events[0]["id"], create.as_str(), "{events:#?}");
    assert_eq!(events[1]["id"], earlier.as_str(), "{events:#?}");
    assert_eq!(events[1]["status"], "success");
    assert_eq!(
        progress_of(&events, &earlier),
        [100],
        "a final action is sent once"
    );

    let progress = progress_of(&events, &create);
    assert!(progress.len() >= 2, "{events:#?}");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress must strictly increase: {progress:?}"
    );
    let last = events.last().expect("events");
    assert_eq!(last["id"], create.as_str());
    assert_eq!(
        (&last["status"], &last["progress"]),
        (&json!("success"), &json!(100))
    );
    for e in &events[..events.len() - 1] {
        if e["id"] == create.as_str() {
            assert_eq!(e["status"], "running", "{e}");
        }
    }
    // Each event is the action exactly as GET shows it.
    let read = m.get(&format!("/v1/actions/{create}")).await;
    assert_eq!(last, &read.body["action"]);
    assert_eq!(
        last["resources"].as_array().map(Vec::len),
        Some(4),
        "the VM and its three volumes"
    );

    // A stream of final actions sends their state and ends.
    let mut stream = SseReader::open(&m, &[create.as_str()]).await;
    assert_eq!(stream.actions().await, [read.body["action"].clone()]);
    m.stop().await;
}

/// A client that reconnects with `Last-Event-ID` (as EventSource does) gets
/// only the states it does not have, then the end; once it has every final
/// state, a 204 that stops EventSource; an id that does not fit is ignored.
#[tokio::test]
async fn a_stream_resumed_from_its_last_event_id_sends_nothing_twice() {
    let m = Meson::start().await;
    let (_, earlier) = create_vm(&m, "one").await;
    assert_eq!(m.wait_action(&earlier).await["status"], "success");
    // Long enough that the stream opens while it runs.
    m.set_boot_time(Duration::from_secs(2));
    let (_, create) = create_vm(&m, "two").await;
    let ids = [earlier.as_str(), create.as_str()];

    // The first two events, then the connection drops.
    let mut first = SseReader::open(&m, &ids).await;
    let (a, b) = (first.next().await.unwrap(), first.next().await.unwrap());
    drop(first);
    assert_eq!(a.data["id"], earlier.as_str());
    assert_eq!(a.id.as_deref(), Some("f100.-"), "{a:?}");
    assert_eq!(b.data["id"], create.as_str());
    let last = b.id.clone().expect("every event has an id");
    let seen = (b.data["status"].clone(), b.data["progress"].clone());
    assert_eq!(last, format!("f100.{}", seen.1), "{b:?}");

    // Resumed: neither state again, the rest up to the final one.
    let mut resumed = SseReader::reading(SseReader::request(&m, &ids, Some(&last)).await);
    let mut rest = Vec::new();
    while let Some(e) = resumed.next().await {
        assert_eq!(e.event, "action", "{e:?}");
        rest.push(e);
    }
    assert!(!rest.is_empty(), "the final state comes");
    for e in &rest {
        assert_eq!(e.data["id"], create.as_str(), "{e:?}");
        assert_ne!(
            (e.data["status"].clone(), e.data["progress"].clone()),
            seen,
            "{e:?}"
        );
    }
    let end = rest.last().unwrap();
    assert_eq!(end.data["status"], "success");
    assert_eq!(end.id.as_deref(), Some("f100.f100"));

    // Everything final was received: nothing more will ever come.
    let done = SseReader::request(&m, &ids, end.id.as_deref()).await;
    assert_eq!(done.status(), StatusCode::NO_CONTENT);
    // An id for other ids, or none at all, sends every current state.
    for other in ["f100", "garbage", "f100.f100.f100"] {
        let mut again = SseReader::reading(SseReader::request(&m, &ids, Some(other)).await);
        assert_eq!(again.actions().await.len(), 2, "{other}");
    }
    m.stop().await;
}

#[tokio::test]
async fn the_stream_delivers_changes_committed_back_to_back() {
    let m = Meson::start().await;
    m.set_boot_time(Duration::from_secs(60));
    let (_, create) = create_vm(&m, "test").await;
    // Seven of eight steps done (87%); the last waits for the 60 s boot.
    wait_progress(&m, &create, 87).await;
    let mut stream = SseReader::open(&m, &[create.as_str()]).await;
    let first = stream.next().await.expect("the current state");
    assert_eq!(first.data["progress"], 87, "{first:?}");

    // Eleven commits in a row, faster than anything would poll: each one
    // must arrive, in order, none merged into the next.
    let pool = &m.dev().pool;
    let id = create.parse().expect("action id");
    for p in 88..=98 {
        let mut tx = meson_db::begin(pool).await.expect("begin");
        meson_db::actions::set_progress(&mut tx, id, p)
            .await
            .expect("progress");
        meson_db::commit(tx).await.expect("commit");
    }
    m.set_boot_time(Duration::from_millis(50));

    let progress: Vec<u64> = stream
        .actions()
        .await
        .iter()
        .map(|e| e["progress"].as_u64().expect("progress"))
        .collect();
    let expected: Vec<u64> = (88..=100).collect();
    assert_eq!(progress, expected, "every change, in commit order");
    m.stop().await;
}

#[tokio::test]
async fn a_stream_for_unknown_actions_is_refused_before_it_starts() {
    let m = Meson::start().await;
    let (_, create) = create_vm(&m, "test").await;
    let stream = |q: String| {
        m.http
            .get(format!("{}/v1/actions/stream{q}", m.base))
            .bearer_auth(&m.token)
            .send()
    };

    let r = stream(format!("?id={}", uuid::Uuid::now_v7()))
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.expect("json error");
    assert_eq!(body["error"]["code"], "not_found");
    // One unknown id among known ones refuses the whole stream.
    let q = format!("?id={create}&id={}", uuid::Uuid::now_v7());
    assert_eq!(
        stream(q).await.expect("sent").status(),
        StatusCode::NOT_FOUND
    );

    let r = stream(String::new()).await.expect("sent");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.expect("json error");
    assert_eq!(body["error"]["details"]["fields"][0]["name"], "id");
    let too_many: Vec<String> = (0..26).map(|_| format!("id={create}")).collect();
    let r = stream(format!("?{}", too_many.join("&")))
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    let r = m
        .http
        .get(format!("{}/v1/actions/stream?id={create}", m.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    m.wait_action(&create).await;
    m.stop().await;
}

#[tokio::test]
async fn open_streams_end_when_the_server_shuts_down() {
    // Running jobs get a second to finish, then go back to the queue.
    let m = Meson::start_with(|o| o.worker.shutdown_grace = Duration::from_secs(1)).await;
    m.set_boot_time(Duration::from_secs(60));
    let (_, create) = create_vm(&m, "test").await;
    let mut stream = SseReader::open(&m, &[&create]).await;
    let first = stream.next().await.expect("the current state");
    assert_eq!(first.data["status"], "running");

    // Stopping lets running work finish first while the API still serves it
    // (guests phone home), then stops the API: an open stream must not hold
    // that up, and ends by itself once the API stops, long before the
    // action it watches does (its VM boots for a minute).
    let stop = tokio::spawn(m.stop());
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        let mut last = first;
        while let Some(e) = stream.next().await {
            last = e;
        }
        last
    })
    .await;
    let last = ended.expect("the stream ended with the server");
    assert_eq!(last.data["status"], "running", "{last:?}");
    tokio::time::timeout(Duration::from_secs(30), stop)
        .await
        .expect("meson stops")
        .expect("clean stop");
}

//! Actions and the resources they touch.

use crate::{DbResult, Tx, corrupt};
use chrono::{DateTime, Utc};
use meson_core::action::{Action, ActionFailure, ActionStatus, ResourceType};
use meson_core::{ActionId, Error, TenantId};
use sqlx::PgPool;
use uuid::Uuid;

struct ActionRow {
    id: Uuid,
    tenant_id: String,
    command: String,
    status: String,
    progress: i16,
    started: DateTime<Utc>,
    finished: Option<DateTime<Utc>>,
    error_code: Option<String>,
    error_message: Option<String>,
    resource_types: Vec<String>,
    resource_ids: Vec<Uuid>,
}

impl TryFrom<ActionRow> for Action {
    type Error = Error;
    fn try_from(r: ActionRow) -> Result<Self, Error> {
        let resources = r
            .resource_types
            .iter()
            .zip(r.resource_ids)
            .map(|(t, id)| {
                ResourceType::parse(t)
                    .map(|t| (t, id))
                    .ok_or_else(|| corrupt("resource type", t))
            })
            .collect::<Result<_, _>>()?;
        Ok(Action {
            id: ActionId(r.id),
            tenant: TenantId(r.tenant_id),
            command: r.command,
            status: ActionStatus::parse(&r.status)
                .ok_or_else(|| corrupt("action status", &r.status))?,
            progress: u8::try_from(r.progress).map_err(|_| corrupt("progress", r.progress))?,
            started: r.started,
            finished: r.finished,
            resources,
            error: r.error_code.map(|code| ActionFailure {
                code,
                message: r.error_message.unwrap_or_default(),
            }),
        })
    }
}

/// Inserts a running action touching `resources`.
pub async fn insert(tx: &mut Tx<'_>, a: &Action) -> Result<(), Error> {
    sqlx::query!(
        r#"insert into actions (id, tenant_id, command, status, progress, started)
           values ($1, $2, $3, 'running', 0, $4)"#,
        a.id.0,
        a.tenant.as_str(),
        a.command,
        a.started,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting an action")?;
    let types: Vec<&str> = a.resources.iter().map(|(t, _)| t.as_str()).collect();
    let ids: Vec<Uuid> = a.resources.iter().map(|(_, id)| *id).collect();
    sqlx::query!(
        r#"insert into action_resources (action_id, resource_type, resource_id)
           select $1, t, id from unnest($2::text[], $3::uuid[]) as r(t, id)"#,
        a.id.0,
        &types as &[&str],
        &ids,
    )
    .execute(&mut **tx)
    .await
    .ctx("inserting action resources")?;
    Ok(())
}

/// Actions by id (`tenant` = None: any tenant), in id order; unknown ids are skipped.
pub async fn get_many(
    pool: &PgPool,
    tenant: Option<&TenantId>,
    ids: &[ActionId],
) -> Result<Vec<Action>, Error> {
    let ids: Vec<Uuid> = ids.iter().map(|a| a.0).collect();
    sqlx::query_as!(
        ActionRow,
        r#"select a.id, a.tenant_id, a.command, a.status, a.progress, a.started, a.finished,
                  a.error_code, a.error_message,
                  coalesce(array_agg(r.resource_type order by r.resource_type, r.resource_id)
                           filter (where r.action_id is not null), '{}') as "resource_types!",
                  coalesce(array_agg(r.resource_id order by r.resource_type, r.resource_id)
                           filter (where r.action_id is not null), '{}') as "resource_ids!"
           from actions a left join action_resources r on r.action_id = a.id
           where a.id = any($1) and ($2::text is null or a.tenant_id = $2)
           group by a.id order by a.id"#,
        &ids,
        tenant.map(TenantId::as_str),
    )
    .fetch_all(pool)
    .await
    .ctx("fetching actions")?
    .into_iter()
    .map(Action::try_from)
    .collect()
}

pub async fn get(pool: &PgPool, tenant: Option<&TenantId>, id: ActionId) -> Result<Action, Error> {
    get_many(pool, tenant, &[id])
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("action", id))
}

/// Advances a running action's progress (never backwards).
pub async fn set_progress(tx: &mut Tx<'_>, id: ActionId, progress: u8) -> Result<(), Error> {
    sqlx::query!(
        r#"update actions set progress = greatest(progress, $2)
           where id = $1 and status = 'running'"#,
        id.0,
        i16::from(progress.min(99)),
    )
    .execute(&mut **tx)
    .await
    .ctx("updating action progress")?;
    Ok(())
}

/// Ends a running action in `success` or `error`.
pub async fn finish(
    tx: &mut Tx<'_>,
    id: ActionId,
    failure: Option<&ActionFailure>,
) -> Result<(), Error> {
    let status = if failure.is_some() {
        ActionStatus::Error
    } else {
        ActionStatus::Success
    };
    sqlx::query!(
        r#"update actions set status = $2, finished = now(), error_code = $3, error_message = $4,
                              progress = case when $2 = 'success' then 100 else progress end
           where id = $1 and status = 'running'"#,
        id.0,
        status.as_str(),
        failure.map(|f| f.code.as_str()),
        failure.map(|f| f.message.as_str()),
    )
    .execute(&mut **tx)
    .await
    .ctx("finishing an action")?;
    Ok(())
}

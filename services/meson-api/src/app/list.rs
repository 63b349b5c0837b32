//! What a list call asks for, as both transports take it: the page, the
//! filters and the sort, parsed and validated here once. REST hands over its
//! query string's pairs, gRPC its `ListOptions` as the same pairs, so a bad
//! parameter is refused alike and named alike on both.
//!
//! The position in a list is [`Page`]: a page number (`page=`) or a keyset
//! cursor (`cursor=`), and [`Paged::pagination`] (`meta.pagination`) says
//! where the next page starts, `next_cursor` among it. A cursor is opaque to
//! clients: the order keys of the last row it follows, how many rows came
//! before (for the page number), and a digest binding it to the list, the
//! tenant, the filters and the sort it was made for ([`Bound`]).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use meson_core::action::ActionStatus;
use meson_core::id::IdRef;
use meson_core::selector::Requirement;
use meson_core::volume::VolumeKind;
use meson_core::{Error, Result, TenantId, VmId};
use meson_db::actions::{ActionSort, ActionSortField};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A list call's parameters as (key, value) pairs, repeated keys kept, in
/// the order given.
pub type Params = [(String, String)];

pub use meson_types::Page;

/// `page` or `cursor`, and `per_page`, from a list call's parameters;
/// absent ones take their defaults.
pub fn parse_page(params: &Params) -> Result<Page> {
    let mut page = Page::default();
    let mut numbered = false;
    for (k, v) in params {
        match k.as_str() {
            "cursor" if v.is_empty() || v.len() > Cursor::MAX_LEN => {
                return Err(meson_db::bad_cursor());
            }
            "cursor" => page.cursor = Some(v.clone()),
            "page" => {
                numbered = true;
                page.page = v
                    .parse()
                    .ok()
                    .filter(|p| *p >= 1)
                    .ok_or_else(|| Error::invalid("page", "must be an integer of at least 1"))?
            }
            "per_page" => {
                page.per_page = v
                    .parse()
                    .ok()
                    .filter(|p| (1..=Page::MAX_PER_PAGE).contains(p))
                    .ok_or_else(|| {
                        Error::invalid(
                            "per_page",
                            format!("must be an integer from 1 to {}", Page::MAX_PER_PAGE),
                        )
                    })?
            }
            _ => {}
        }
    }
    if numbered && page.cursor.is_some() {
        return Err(Error::invalid(
            "page",
            "cannot be given with cursor: a cursor names its page",
        ));
    }
    Ok(page)
}

/// Refuses a cursor for `what`, a list that pages by number only.
pub fn by_number(page: &Page, what: &str) -> Result<()> {
    match page.cursor {
        Some(_) => Err(Error::invalid(
            "cursor",
            format!("{what} pages by number only: use page="),
        )),
        None => Ok(()),
    }
}

/// What a cursor is bound to: a digest of the list, the tenant, and the
/// filters and sort of the call that made it. A cursor is only taken back
/// by a call with the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound([u8; 8]);

impl Bound {
    /// `list` names the list (`vms`, …); `filter` is its filters and sort in
    /// one canonical form.
    pub fn new(list: &str, tenant: &TenantId, filter: &impl serde::Serialize) -> Result<Bound> {
        let filter =
            serde_json::to_vec(filter).map_err(|e| Error::internal_from("a list's filter", e))?;
        let mut h = Sha256::new();
        for part in [list.as_bytes(), tenant.as_str().as_bytes(), &filter] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        let digest = h.finalize();
        let mut b = [0u8; 8];
        b.copy_from_slice(&digest[..8]);
        Ok(Bound(b))
    }

    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A cursor as it travels, base64url-encoded JSON.
#[derive(Serialize, Deserialize)]
struct Cursor {
    /// [`Bound`], in hex.
    b: String,
    /// How many rows came before the page it leads to.
    n: u64,
    /// The order keys of the row it follows, then that row's id.
    k: Vec<String>,
}

impl Cursor {
    /// Longer than any cursor meson makes (two keys of at most a name's
    /// length, an id, a digest).
    const MAX_LEN: usize = 2048;

    fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(json)
    }

    /// `raw` as a cursor of the list `bound` names.
    fn decode(raw: &str, bound: Bound) -> Result<Cursor> {
        let c: Cursor = URL_SAFE_NO_PAD
            .decode(raw)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or_else(meson_db::bad_cursor)?;
        if c.b != bound.hex() {
            return Err(Error::invalid(
                "cursor",
                "was made for another list, filter or sort: repeat the parameters of the \
                 call that gave it",
            ));
        }
        Ok(c)
    }
}

/// A page of the tenant's `T`s that `filter` keeps, read on `conn`: from
/// where `page` starts (its cursor checked against `bound`), with where the
/// next one starts.
pub async fn page<T: meson_db::Listable>(
    conn: &mut meson_db::PgConnection,
    tenant: &TenantId,
    page: &Page,
    bound: Bound,
    filter: &T::Filter,
) -> Result<Paged<T>> {
    let at = PageStart::of(page, bound)?;
    let listed = meson_db::page::<T>(conn, tenant, filter, &at.start, at.limit()).await?;
    Ok(at.paged(listed))
}

impl super::App {
    /// [`page`], on a connection of its own.
    pub(crate) async fn page<T: meson_db::Listable>(
        &self,
        tenant: &TenantId,
        page: &Page,
        bound: Bound,
        filter: &T::Filter,
    ) -> Result<Paged<T>> {
        let mut conn = meson_db::acquire(&self.pool).await?;
        self::page(&mut conn, tenant, page, bound, filter).await
    }
}

/// Where a list call's page starts, its cursor (if any) checked against the
/// list it is for.
pub struct PageStart {
    pub start: meson_db::Start,
    /// Rows before the page (as counted while walking, with a cursor).
    at: u64,
    per_page: u32,
    bound: Bound,
}

impl PageStart {
    pub fn of(page: &Page, bound: Bound) -> Result<PageStart> {
        let (start, at) = match &page.cursor {
            Some(raw) => {
                let c = Cursor::decode(raw, bound)?;
                (meson_db::Start::After(c.k), c.n)
            }
            None => (meson_db::Start::Offset(page.offset()), page.offset() as u64),
        };
        Ok(PageStart {
            start,
            at,
            per_page: page.per_page,
            bound,
        })
    }

    pub fn limit(&self) -> i64 {
        i64::from(self.per_page)
    }

    /// The page meson-db read from here.
    pub fn paged<T>(self, listed: meson_db::Listed<T>) -> Paged<T> {
        let next_cursor = listed.more.map(|k| {
            Cursor {
                b: self.bound.hex(),
                n: self.at + listed.items.len() as u64,
                k,
            }
            .encode()
        });
        let page = u32::try_from(self.at / u64::from(self.per_page.max(1)) + 1).unwrap_or(u32::MAX);
        Paged {
            items: listed.items,
            total: listed.total.max(0) as u64,
            page: Page {
                page,
                per_page: self.per_page,
                cursor: None,
            },
            next_cursor,
        }
    }
}

/// A page of a list, and where it is.
pub struct Paged<T> {
    pub items: Vec<T>,
    /// How many entries the list has in all.
    pub total: u64,
    /// Which page it is (by number, also when a cursor named it).
    pub page: Page,
    pub next_cursor: Option<String>,
}

impl<T> Paged<T> {
    /// The same page with `items` in the place of its own.
    pub fn with<U>(self, items: Vec<U>) -> Paged<U> {
        Paged {
            items,
            total: self.total,
            page: self.page,
            next_cursor: self.next_cursor,
        }
    }

    /// `meta.pagination`. A next page exists when rows follow this one
    /// (whatever the total, which rows created or deleted meanwhile move).
    pub fn pagination(&self) -> meson_types::Pagination {
        meson_types::Pagination {
            next_page: self.next_cursor.as_ref().map(|_| self.page.page + 1),
            next_cursor: self.next_cursor.clone(),
            ..self.page.pagination(self.total)
        }
    }
}

/// A field a resource list sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortField {
    Id,
    Name,
    Status,
    Created,
}

impl SortField {
    pub fn parse(s: &str) -> Option<SortField> {
        Some(match s {
            "id" => SortField::Id,
            "name" => SortField::Name,
            "status" => SortField::Status,
            "created" => SortField::Created,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SortField::Id => "id",
            SortField::Name => "name",
            SortField::Status => "status",
            SortField::Created => "created",
        }
    }
}

/// One sort key of a resource list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    pub field: SortField,
    pub descending: bool,
}

impl SortKey {
    /// `field[:asc|:desc]`.
    pub fn parse(v: &str) -> Result<SortKey> {
        let (field, dir) = v.split_once(':').unwrap_or((v, "asc"));
        match (SortField::parse(field), dir) {
            (Some(field), "asc" | "desc") => Ok(SortKey {
                field,
                descending: dir == "desc",
            }),
            _ => Err(Error::invalid(
                "sort",
                format!("'{v}': sort by id, name, status or created, optionally :asc or :desc"),
            )),
        }
    }

    /// As the database layer takes it: `field:asc|desc`.
    fn db(self) -> String {
        let dir = if self.descending { "desc" } else { "asc" };
        format!("{}:{dir}", self.field.as_str())
    }
}

/// A list of VMs, networks or clusters: `page`, `per_page`, `name=`,
/// `status=` (repeatable), `label_selector=`, `sort=` (up to two keys).
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    pub page: Page,
    pub name: Option<String>,
    pub statuses: Vec<String>,
    pub selector: Vec<Requirement>,
    pub sort: Vec<SortKey>,
}

impl ListQuery {
    pub const MAX_SORT_KEYS: usize = 2;

    /// `is_status` says which statuses the resource has.
    pub fn parse(params: &Params, is_status: impl Fn(&str) -> bool) -> Result<ListQuery> {
        let mut q = ListQuery {
            page: parse_page(params)?,
            ..ListQuery::default()
        };
        for (k, v) in params {
            match k.as_str() {
                // PostgreSQL text cannot hold NUL, and no name contains one.
                "name" if v.contains('\0') => {
                    return Err(Error::invalid("name", "must not contain NUL characters"));
                }
                "name" => q.name = Some(v.clone()),
                "status" if !is_status(v) => {
                    return Err(Error::invalid("status", format!("unknown status '{v}'")));
                }
                "status" => q.statuses.push(v.clone()),
                "label_selector" => q.selector.extend(meson_core::selector::parse(v)?),
                "sort" => {
                    let key = SortKey::parse(v)?;
                    if q.sort.len() == Self::MAX_SORT_KEYS {
                        return Err(Error::invalid("sort", "at most two sort keys"));
                    }
                    q.sort.push(key);
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// What its cursors are bound to, in the list `list` of `tenant`.
    pub fn bound(&self, list: &str, tenant: &TenantId) -> Result<Bound> {
        let mut statuses = self.statuses.clone();
        statuses.sort();
        statuses.dedup();
        let f = self.filter();
        Bound::new(list, tenant, &(&f.name, statuses, &f.selector, &f.sort))
    }

    /// The database's filter for it.
    pub(crate) fn filter(&self) -> meson_db::ListFilter {
        meson_db::ListFilter {
            name: self.name.clone(),
            statuses: self.statuses.clone(),
            selector: self.selector.clone(),
            sort: self.sort.iter().map(|k| k.db()).collect(),
        }
    }
}

/// A list of backups: a [`ListQuery`]'s parameters and `vm=<id>`.
#[derive(Clone, Debug, Default)]
pub struct BackupQuery {
    pub list: ListQuery,
    pub vm: Option<VmId>,
}

impl BackupQuery {
    pub fn parse(params: &Params) -> Result<BackupQuery> {
        let list = ListQuery::parse(params, |s| {
            meson_core::backup::BackupStatus::parse(s).is_some()
        })?;
        let mut vm = None;
        for (k, v) in params {
            if k == "vm" {
                vm = Some(id::<VmId>("vm", v)?);
            }
        }
        Ok(BackupQuery { list, vm })
    }

    /// What its cursors are bound to, in `tenant`'s list of backups (of
    /// its VM).
    pub fn bound(&self, tenant: &TenantId) -> Result<Bound> {
        let list = match self.vm {
            Some(vm) => format!("backups of {vm}"),
            None => "backups".to_owned(),
        };
        self.list.bound(&list, tenant)
    }

    pub(crate) fn filter(&self) -> meson_db::backups::BackupFilter {
        meson_db::backups::BackupFilter {
            list: self.list.filter(),
            vm: self.vm,
        }
    }
}

/// A list of volumes: `page`, `per_page`, `vm=<id>`,
/// `kind=boot|cloudinit|data`, `standalone=true|false`.
#[derive(Clone, Debug, Default)]
pub struct VolumeQuery {
    pub page: Page,
    pub filter: meson_db::volumes::VolumeFilter,
}

impl VolumeQuery {
    pub fn parse(params: &Params) -> Result<VolumeQuery> {
        let mut q = VolumeQuery {
            page: parse_page(params)?,
            ..VolumeQuery::default()
        };
        for (k, v) in params {
            match k.as_str() {
                "vm" => q.filter.vm = Some(id::<VmId>("vm", v)?),
                "kind" => {
                    q.filter.kind =
                        Some(VolumeKind::parse(v).ok_or_else(|| {
                            Error::invalid("kind", "must be boot, cloudinit or data")
                        })?)
                }
                "standalone" => q.filter.standalone = Some(query_bool("standalone", v)?),
                _ => {}
            }
        }
        Ok(q)
    }

    /// What its cursors are bound to, in `tenant`'s list of volumes.
    pub fn bound(&self, tenant: &TenantId) -> Result<Bound> {
        let f = &self.filter;
        Bound::new(
            "volumes",
            tenant,
            &(f.vm.map(|v| v.0), f.kind.map(|k| k.as_str()), f.standalone),
        )
    }
}

/// The filters of a list of actions: `id=`, `status=` and `sort=`, each
/// repeatable. (One resource's actions come in pages: [`Page`] too.)
#[derive(Clone, Debug, Default)]
pub struct ActionQuery {
    pub ids: Vec<IdRef>,
    pub status: Vec<ActionStatus>,
    pub sort: Vec<ActionSort>,
}

impl ActionQuery {
    pub fn parse(params: &Params) -> Result<ActionQuery> {
        let mut q = ActionQuery::default();
        let mut sort = Vec::new();
        for (k, v) in params {
            match k.as_str() {
                "id" => q.ids.push(IdRef::parse(v).ok_or_else(|| {
                    Error::invalid(
                        "id",
                        format!(
                            "'{v}' is not an id, nor {} or more of an id's first or last hex digits",
                            IdRef::MIN_DIGITS
                        ),
                    )
                })?),
                "status" => q.status.push(ActionStatus::parse(v).ok_or_else(|| {
                    Error::invalid("status", "must be running, success or error")
                })?),
                "sort" => sort.push(v.as_str()),
                _ => {}
            }
        }
        q.sort = parse_action_sort(&sort)?;
        Ok(q)
    }
}

/// Parses repeated `sort=field[:asc|:desc]` values of an action list, first
/// key first. A field given twice keeps its first direction: a later key on
/// the same field could never change the order anyway.
fn parse_action_sort(values: &[&str]) -> Result<Vec<ActionSort>> {
    let bad = |v: &str| {
        let fields: Vec<&str> = ActionSortField::ALL.iter().map(|f| f.as_str()).collect();
        Error::invalid(
            "sort",
            format!(
                "'{v}' is not a sort key; use field[:asc|:desc] with a field among {}",
                fields.join(", ")
            ),
        )
    };
    let mut out: Vec<ActionSort> = Vec::with_capacity(values.len());
    for v in values {
        let (field, descending) = match v.split_once(':') {
            None => (*v, false),
            Some((field, "asc")) => (field, false),
            Some((field, "desc")) => (field, true),
            Some(_) => return Err(bad(v)),
        };
        let field = ActionSortField::parse(field).ok_or_else(|| bad(v))?;
        if !out.iter().any(|s| s.field == field) {
            out.push(ActionSort { field, descending });
        }
    }
    Ok(out)
}

/// Parses an id; a malformed one names `field`.
pub fn id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T> {
    raw.parse()
        .map_err(|_| Error::invalid(field, format!("'{raw}' is not a valid id")))
}

/// A query parameter's boolean: `true`/`1` or `false`/`0`, any case.
pub fn query_bool(field: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(Error::invalid(field, "must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rejected(r: Result<impl std::fmt::Debug>) -> String {
        match r {
            Err(Error::InvalidInput { fields }) => fields[0].name.clone(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn pages_default_and_are_bounded() {
        assert_eq!(parse_page(&[]).unwrap(), Page::default());
        let p = parse_page(&params(&[("page", "3"), ("per_page", "50")])).unwrap();
        assert_eq!((p.page, p.per_page, p.offset()), (3, 50, 100));
        assert_eq!(rejected(parse_page(&params(&[("page", "0")]))), "page");
        assert_eq!(
            rejected(parse_page(&params(&[("per_page", "51")]))),
            "per_page"
        );
    }

    #[test]
    fn a_cursor_names_its_page_alone() {
        let p = parse_page(&params(&[("cursor", "abc"), ("per_page", "10")])).unwrap();
        assert_eq!((p.cursor.as_deref(), p.per_page), (Some("abc"), 10));
        assert_eq!(
            rejected(parse_page(&params(&[("cursor", "abc"), ("page", "2")]))),
            "page"
        );
        assert_eq!(rejected(parse_page(&params(&[("cursor", "")]))), "cursor");
        let long = "a".repeat(Cursor::MAX_LEN + 1);
        assert_eq!(
            rejected(parse_page(&params(&[("cursor", long.as_str())]))),
            "cursor"
        );
    }

    fn query(kv: &[(&str, &str)]) -> ListQuery {
        ListQuery::parse(&params(kv), |s| s == "running" || s == "off").unwrap()
    }

    #[test]
    fn a_cursor_leads_on_from_its_page_and_only_in_its_own_list() {
        let tenant = TenantId("acme".into());
        let q = query(&[("sort", "name"), ("per_page", "2")]);
        let bound = q.bound("vms", &tenant).unwrap();
        let at = PageStart::of(&q.page, bound).unwrap();
        assert_eq!(at.start, meson_db::Start::Offset(0));
        let paged = at.paged(meson_db::Listed {
            items: vec![1, 2],
            total: 5,
            more: Some(vec!["b".into(), "id-of-b".into()]),
        });
        let cursor = paged.next_cursor.clone().expect("a next page");
        let p = paged.pagination();
        assert_eq!(
            (p.page, p.next_page, p.next_cursor),
            (1, Some(2), Some(cursor.clone()))
        );

        // Taken back: the rows after b, the second page.
        let next = ListQuery {
            page: Page::after(cursor.clone(), 2),
            ..query(&[("sort", "name:asc")])
        };
        let at = PageStart::of(&next.page, next.bound("vms", &tenant).unwrap()).unwrap();
        assert_eq!(
            at.start,
            meson_db::Start::After(vec!["b".into(), "id-of-b".into()])
        );
        let last = at.paged(meson_db::Listed {
            items: vec![3, 4],
            total: 5,
            more: None,
        });
        assert_eq!((last.page.page, last.next_cursor), (2, None));

        // Anywhere else it is refused by name.
        let other = TenantId("other".into());
        for bound in [
            q.bound("clusters", &tenant),
            q.bound("vms", &other),
            query(&[("sort", "name:desc")]).bound("vms", &tenant),
            query(&[("sort", "name"), ("status", "off")]).bound("vms", &tenant),
        ] {
            assert_eq!(
                rejected(PageStart::of(&next.page, bound.unwrap()).map(|_| ())),
                "cursor"
            );
        }
        // Statuses bind as a set.
        assert_eq!(
            query(&[("status", "off"), ("status", "running")])
                .bound("vms", &tenant)
                .unwrap(),
            query(&[("status", "running"), ("status", "off")])
                .bound("vms", &tenant)
                .unwrap()
        );
    }

    #[test]
    fn a_list_query_becomes_the_database_filter() {
        let q = ListQuery::parse(
            &params(&[
                ("name", "web"),
                ("status", "running"),
                ("sort", "created:desc"),
                ("sort", "name"),
                ("label_selector", "env=prod"),
            ]),
            |s| s == "running",
        )
        .unwrap();
        let f = q.filter();
        assert_eq!(f.name.as_deref(), Some("web"));
        assert_eq!(f.statuses, ["running"]);
        assert_eq!(f.sort, ["created:desc", "name:asc"]);
        assert_eq!(f.selector.len(), 1);
    }

    #[test]
    fn bad_list_parameters_name_their_field() {
        let parse = |kv: &[(&str, &str)]| ListQuery::parse(&params(kv), |s| s == "running");
        assert_eq!(rejected(parse(&[("name", "a\0b")])), "name");
        assert_eq!(rejected(parse(&[("status", "gone")])), "status");
        assert_eq!(rejected(parse(&[("sort", "size")])), "sort");
        assert_eq!(rejected(parse(&[("sort", "id:up")])), "sort");
        assert_eq!(
            rejected(parse(&[
                ("sort", "id"),
                ("sort", "name"),
                ("sort", "status")
            ])),
            "sort"
        );
        assert!(parse(&[("name", "web-1")]).is_ok());
    }

    #[test]
    fn volume_queries() {
        let q = VolumeQuery::parse(&params(&[("kind", "data"), ("standalone", "TRUE")])).unwrap();
        assert_eq!(q.filter.kind, Some(VolumeKind::Data));
        assert_eq!(q.filter.standalone, Some(true));
        assert_eq!(rejected(VolumeQuery::parse(&params(&[("vm", "x")]))), "vm");
        assert_eq!(
            rejected(VolumeQuery::parse(&params(&[("standalone", "y")]))),
            "standalone"
        );
    }

    fn key(field: ActionSortField, descending: bool) -> ActionSort {
        ActionSort { field, descending }
    }

    #[test]
    fn action_sort_keys_parse_in_order_with_directions() {
        use ActionSortField::*;
        assert_eq!(parse_action_sort(&[]).expect("empty"), []);
        assert_eq!(
            parse_action_sort(&["status", "progress:desc", "started:asc", "id:desc"])
                .expect("valid"),
            [
                key(Status, false),
                key(Progress, true),
                key(Started, false),
                key(Id, true)
            ]
        );
        assert_eq!(
            parse_action_sort(&["command:desc", "finished"]).expect("valid"),
            [key(Command, true), key(Finished, false)]
        );
        // Repeats keep the first key; they could not change the order.
        assert_eq!(
            parse_action_sort(&["id:desc", "id:asc", "id"]).expect("valid"),
            [key(Id, true)]
        );
    }

    #[test]
    fn bad_action_sort_keys_name_the_sort_field() {
        for bad in [
            &["name"][..],
            &[""],
            &["id:"],
            &["id:up"],
            &["ID"],
            &[":desc"],
            &["id:desc:asc"],
            &["progress", "tenant_id"],
        ] {
            assert_eq!(rejected(parse_action_sort(bad)), "sort", "{bad:?}");
        }
    }
}

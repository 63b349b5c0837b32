//! What a list call asks for, as both transports take it: the page, the
//! filters and the sort, parsed and validated here once. REST hands over its
//! query string's pairs, gRPC its `ListOptions` as the same pairs, so a bad
//! parameter is refused alike and named alike on both.
//!
//! The position in a list is [`Page`], and `meta.pagination`
//! ([`pagination`]) says where the next one starts: a keyset cursor
//! (`cursor=`, opaque) would be one more way to name a position in `Page`
//! and one more field of `meta.pagination`, with no caller's signature
//! changing.

use meson_core::action::ActionStatus;
use meson_core::selector::Requirement;
use meson_core::volume::VolumeKind;
use meson_core::{ActionId, Error, Result, VmId};
use meson_db::actions::{ActionSort, ActionSortField};

/// A list call's parameters as (key, value) pairs, repeated keys kept, in
/// the order given.
pub type Params = [(String, String)];

pub use meson_types::Page;

/// `page` and `per_page` from a list call's parameters; absent ones take
/// their defaults.
pub fn parse_page(params: &Params) -> Result<Page> {
    let mut page = Page::default();
    for (k, v) in params {
        match k.as_str() {
            "page" => {
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
    Ok(page)
}

/// `page` of a meson-db list, which takes a limit and an offset and answers
/// the page's items and how many there are in all.
pub async fn read_page<T, F>(page: Page, list: impl FnOnce(i64, i64) -> F) -> Result<(Vec<T>, u64)>
where
    F: std::future::Future<Output = Result<(Vec<T>, i64)>>,
{
    let (items, total) = list(page.limit(), page.offset()).await?;
    Ok((items, total.max(0) as u64))
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
                "standalone" => {
                    q.filter.standalone = Some(match v.to_ascii_lowercase().as_str() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => return Err(Error::invalid("standalone", "must be true or false")),
                    })
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

/// The filters of a list of actions: `id=`, `status=` and `sort=`, each
/// repeatable. (One resource's actions come in pages: [`Page`] too.)
#[derive(Clone, Debug, Default)]
pub struct ActionQuery {
    pub ids: Vec<ActionId>,
    pub status: Vec<ActionStatus>,
    pub sort: Vec<ActionSort>,
}

impl ActionQuery {
    pub fn parse(params: &Params) -> Result<ActionQuery> {
        let mut q = ActionQuery::default();
        let mut sort = Vec::new();
        for (k, v) in params {
            match k.as_str() {
                "id" => q.ids.push(id("id", v)?),
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

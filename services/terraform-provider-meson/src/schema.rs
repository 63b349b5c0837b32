//! Schemas, declared once per resource, and what the provider derives from
//! them: the protocol's schema messages, the value type, and the generic
//! halves of planning (unknown computed values, replacement paths), of
//! applying (filling the planned unknowns from meson's answer) and of
//! refreshing (meson's view of the attributes it is the authority on).

use crate::proto;
use crate::value::{Ty, V};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Required,
    Optional,
    /// Set by meson only.
    Computed,
    /// Set in the configuration, else by meson (its default, or what it
    /// reports for an imported resource).
    OptionalComputed,
}

#[derive(Clone, Debug)]
pub struct Attr {
    pub name: &'static str,
    pub ty: Ty,
    pub description: &'static str,
    pub mode: Mode,
    pub sensitive: bool,
    /// A change replaces the resource (meson cannot change it in place).
    pub force_new: bool,
    /// A computed value an in-place update may change (unknown in its plan).
    pub volatile: bool,
    /// Refreshed from meson even when the state has a value: what meson
    /// reports here is what a configuration says, so a difference is drift.
    pub tracked: bool,
    /// What a configuration without it plans (it is optional and computed):
    /// planned again when it is removed from the configuration, as a
    /// default should be, rather than kept at its last value.
    pub default: Option<V>,
    /// Another attribute of the block that meson chooses this one's value
    /// along with: unknown in a plan that changes that one, unless the
    /// configuration sets it.
    pub follows: Option<&'static str>,
}

impl Attr {
    fn new(name: &'static str, ty: Ty, mode: Mode, description: &'static str) -> Attr {
        Attr {
            name,
            ty,
            description,
            mode,
            sensitive: false,
            force_new: false,
            volatile: false,
            tracked: false,
            default: None,
            follows: None,
        }
    }

    pub fn required(name: &'static str, ty: Ty, description: &'static str) -> Attr {
        Attr::new(name, ty, Mode::Required, description)
    }

    pub fn optional(name: &'static str, ty: Ty, description: &'static str) -> Attr {
        Attr::new(name, ty, Mode::Optional, description)
    }

    pub fn computed(name: &'static str, ty: Ty, description: &'static str) -> Attr {
        Attr::new(name, ty, Mode::Computed, description)
    }

    /// Optional, defaulted (or reported) by meson.
    pub fn defaulted(name: &'static str, ty: Ty, description: &'static str) -> Attr {
        Attr::new(name, ty, Mode::OptionalComputed, description)
    }

    pub fn force_new(mut self) -> Attr {
        self.force_new = true;
        self
    }

    pub fn sensitive(mut self) -> Attr {
        self.sensitive = true;
        self
    }

    pub fn volatile(mut self) -> Attr {
        self.volatile = true;
        self
    }

    pub fn tracked(mut self) -> Attr {
        self.tracked = true;
        self
    }

    /// Planned as `v` whenever the configuration leaves it out.
    pub fn default(mut self, v: V) -> Attr {
        self.mode = Mode::OptionalComputed;
        self.default = Some(v);
        self
    }

    /// Unknown (meson chooses it) in a plan that changes `other`, unless
    /// configured.
    pub fn follows(mut self, other: &'static str) -> Attr {
        self.follows = Some(other);
        self
    }

    fn computed_mode(&self) -> bool {
        matches!(self.mode, Mode::Computed | Mode::OptionalComputed)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    /// One block (null when absent).
    Single,
    /// Blocks in order.
    List,
}

#[derive(Clone, Debug)]
pub struct Nested {
    pub name: &'static str,
    pub nesting: Nesting,
    pub min: i64,
    pub max: i64,
    pub block: Block,
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub description: &'static str,
    pub attrs: Vec<Attr>,
    pub blocks: Vec<Nested>,
}

/// A path into a value, as diagnostics and replacement paths name it.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Attr(String),
    Index(i64),
}

pub fn path_proto(steps: &[Step]) -> proto::AttributePath {
    use proto::attribute_path::{Step as PStep, step::Selector};
    proto::AttributePath {
        steps: steps
            .iter()
            .map(|s| PStep {
                selector: Some(match s {
                    Step::Attr(a) => Selector::AttributeName(a.clone()),
                    Step::Index(i) => Selector::ElementKeyInt(*i),
                }),
            })
            .collect(),
    }
}

/// The `timeouts` block every resource has: how long to wait on meson's
/// actions.
pub fn timeouts_block() -> Nested {
    let t = |name, d| Attr::optional(name, Ty::Str, d);
    Nested {
        name: "timeouts",
        nesting: Nesting::Single,
        // A single block is optional with both bounds 0, required with both 1.
        min: 0,
        max: 0,
        block: Block {
            description: "How long to wait on meson's actions: a number with a unit, `90s`, `20m`, `1h` (default 30m).",
            attrs: vec![
                t("create", "How long a create may take."),
                t("update", "How long an update may take."),
                t("delete", "How long a delete may take."),
            ],
            blocks: vec![],
        },
    }
}

impl Block {
    pub fn ty(&self) -> Ty {
        let mut attrs: Vec<(String, Ty)> = self
            .attrs
            .iter()
            .map(|a| (a.name.to_owned(), a.ty.clone()))
            .collect();
        for b in &self.blocks {
            let t = b.block.ty();
            attrs.push((
                b.name.to_owned(),
                match b.nesting {
                    Nesting::Single => t,
                    Nesting::List => Ty::list(t),
                },
            ));
        }
        Ty::Obj(attrs)
    }

    pub fn to_proto(&self) -> proto::schema::Block {
        use proto::schema::{Attribute, NestedBlock, nested_block::NestingMode};
        proto::schema::Block {
            version: 0,
            attributes: self
                .attrs
                .iter()
                .map(|a| Attribute {
                    name: a.name.to_owned(),
                    r#type: a.ty.to_json().to_string().into_bytes(),
                    description: a.description.to_owned(),
                    required: a.mode == Mode::Required,
                    optional: matches!(a.mode, Mode::Optional | Mode::OptionalComputed),
                    computed: a.computed_mode(),
                    sensitive: a.sensitive,
                    description_kind: proto::StringKind::Markdown as i32,
                    deprecated: false,
                })
                .collect(),
            block_types: self
                .blocks
                .iter()
                .map(|b| NestedBlock {
                    type_name: b.name.to_owned(),
                    block: Some(b.block.to_proto()),
                    nesting: match b.nesting {
                        Nesting::Single => NestingMode::Single,
                        Nesting::List => NestingMode::List,
                    } as i32,
                    min_items: b.min,
                    max_items: b.max,
                })
                .collect(),
            description: self.description.to_owned(),
            description_kind: proto::StringKind::Markdown as i32,
            deprecated: false,
        }
    }

    pub fn schema(&self) -> proto::Schema {
        proto::Schema {
            version: 0,
            block: Some(self.to_proto()),
        }
    }

    /// The planned state: `proposed` (Terraform's merge of the
    /// configuration with the prior state) with the computed values meson
    /// will set unknown, and the paths whose change replaces the resource.
    pub fn plan(&self, prior: &V, proposed: &V, config: &V) -> (V, Vec<Vec<Step>>) {
        let mut replace = Vec::new();
        let creating = prior.is_null();
        let mut planned = self.plan_at(prior, proposed, config, creating, &[], &mut replace);
        if !creating && replace.is_empty() && !same(&planned, prior) {
            self.unknown_volatile(&mut planned);
        }
        (planned, replace)
    }

    fn plan_at(
        &self,
        prior: &V,
        proposed: &V,
        config: &V,
        creating: bool,
        at: &[Step],
        replace: &mut Vec<Vec<Step>>,
    ) -> V {
        if proposed.is_null() {
            return V::Null;
        }
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            let mut v = proposed.get(a.name).clone();
            let path = || {
                let mut p = at.to_vec();
                p.push(Step::Attr(a.name.to_owned()));
                p
            };
            let unset = config.get(a.name).is_null();
            if let (true, Some(d)) = (unset, &a.default) {
                v = d.clone();
            }
            if creating {
                if a.computed_mode() && unset && a.default.is_none() {
                    v = V::Unknown;
                }
            } else if a.force_new && (!same(&v, prior.get(a.name)) || v.has_unknown()) {
                replace.push(path());
            }
            out.insert(a.name.to_owned(), v);
        }
        if !creating {
            for a in &self.attrs {
                if let Some(other) = a.follows
                    && config.get(a.name).is_null()
                    && !same(out.get(other).unwrap_or(&V::Null), prior.get(other))
                {
                    out.insert(a.name.to_owned(), V::Unknown);
                }
            }
        }
        for b in &self.blocks {
            let name = b.name.to_owned();
            let mut at_b = at.to_vec();
            at_b.push(Step::Attr(name.clone()));
            let v = match b.nesting {
                Nesting::Single => b.block.plan_at(
                    prior.get(b.name),
                    proposed.get(b.name),
                    config.get(b.name),
                    creating || prior.get(b.name).is_null(),
                    &at_b,
                    replace,
                ),
                Nesting::List => match proposed.get(b.name) {
                    V::List(items) => V::List(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| {
                                let mut at_i = at_b.clone();
                                at_i.push(Step::Index(i as i64));
                                let p = prior.get(b.name).at(i);
                                b.block.plan_at(
                                    p,
                                    item,
                                    config.get(b.name).at(i),
                                    creating || p.is_null(),
                                    &at_i,
                                    replace,
                                )
                            })
                            .collect(),
                    ),
                    other => other.clone(),
                },
            };
            // Adding or removing list elements of a block that forces a new
            // resource replaces it too.
            if !creating
                && b.block.attrs.iter().any(|a| a.force_new)
                && b.nesting == Nesting::List
                && list_len(prior.get(b.name)) != list_len(&v)
            {
                replace.push(at_b.clone());
            }
            out.insert(name, v);
        }
        V::Obj(out)
    }

    fn unknown_volatile(&self, v: &mut V) {
        if let V::Obj(m) = v {
            for a in self.attrs.iter().filter(|a| a.volatile) {
                m.insert(a.name.to_owned(), V::Unknown);
            }
            for b in &self.blocks {
                match (b.nesting, m.get_mut(b.name)) {
                    (Nesting::Single, Some(inner)) => b.block.unknown_volatile(inner),
                    (Nesting::List, Some(V::List(items))) => {
                        items.iter_mut().for_each(|i| b.block.unknown_volatile(i))
                    }
                    _ => {}
                }
            }
        }
    }

    /// The state after an apply: the planned values, each unknown one taken
    /// from meson's answer `api` (plain JSON, as the resource reads it).
    pub fn fill(&self, planned: &V, api: &serde_json::Value) -> V {
        let api = V::from_json(api);
        self.fill_at(planned, &api)
    }

    fn fill_at(&self, planned: &V, api: &V) -> V {
        match planned {
            V::Null => return V::Null,
            V::Unknown => return api.clone(),
            _ => {}
        }
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            let v = match planned.get(a.name) {
                V::Unknown => api.get(a.name).clone(),
                other => other.clone(),
            };
            out.insert(a.name.to_owned(), v);
        }
        for b in &self.blocks {
            let v = match (b.nesting, planned.get(b.name)) {
                (_, V::Unknown) => api.get(b.name).clone(),
                (Nesting::Single, p) => b.block.fill_at(p, api.get(b.name)),
                (Nesting::List, V::List(items)) => V::List(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, p)| b.block.fill_at(p, api.get(b.name).at(i)))
                        .collect(),
                ),
                (_, other) => other.clone(),
            };
            out.insert(b.name.to_owned(), v);
        }
        V::Obj(out)
    }

    /// The state after a refresh (or an import, from a null prior): what
    /// meson reports for the tracked attributes and for those the state
    /// lacks; the rest (configuration meson does not report back) kept.
    pub fn refresh(&self, prior: &V, api: &serde_json::Value) -> V {
        self.refresh_at(prior, &V::from_json(api), true)
    }

    fn refresh_at(&self, prior: &V, api: &V, top: bool) -> V {
        let mut out = BTreeMap::new();
        for a in &self.attrs {
            let p = prior.get(a.name);
            let from_api = match api {
                V::Obj(m) => m.get(a.name),
                _ => None,
            };
            let v = match from_api {
                Some(v) if a.tracked || p.is_null() => v.clone(),
                _ => p.clone(),
            };
            out.insert(a.name.to_owned(), v);
        }
        for b in &self.blocks {
            let p = prior.get(b.name);
            let from_api = api.get(b.name);
            let v = if top && b.name == "timeouts" {
                p.clone()
            } else {
                match (b.nesting, p, from_api) {
                    (_, _, V::Null) => p.clone(),
                    (Nesting::Single, _, a) => b.block.refresh_at(p, a, false),
                    (Nesting::List, _, V::List(items)) => V::List(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, a)| b.block.refresh_at(p.at(i), a, false))
                            .collect(),
                    ),
                    _ => p.clone(),
                }
            };
            out.insert(b.name.to_owned(), v);
        }
        V::Obj(out)
    }
}

/// Equal values, an absent attribute counting as null.
fn same(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Obj(x), V::Obj(y)) => x.keys().chain(y.keys()).all(|k| same(a.get(k), b.get(k))),
        (V::List(x), V::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        _ => a == b,
    }
}

fn list_len(v: &V) -> usize {
    match v {
        V::List(l) => l.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block() -> Block {
        Block {
            description: "",
            attrs: vec![
                Attr::computed("id", Ty::Str, ""),
                Attr::required("name", Ty::Str, "").tracked(),
                Attr::required("cidr", Ty::Str, "").force_new(),
                Attr::defaulted("dhcp", Ty::Bool, ""),
                Attr::computed("status", Ty::Str, "").volatile(),
            ],
            blocks: vec![timeouts_block()],
        }
    }

    fn v(j: serde_json::Value) -> V {
        V::from_json(&j)
    }

    #[test]
    fn create_marks_computed_unknown_then_apply_fills_them() {
        let b = block();
        let config = v(json!({"name": "a", "cidr": "10.0.0.0/24"}));
        let (planned, replace) = b.plan(&V::Null, &config, &config);
        assert!(replace.is_empty());
        assert_eq!(planned.get("id"), &V::Unknown);
        assert_eq!(planned.get("dhcp"), &V::Unknown);
        assert_eq!(planned.get("name"), &V::Str("a".into()));
        let state = b.fill(
            &planned,
            &json!({"id": "x", "name": "A", "cidr": "10.0.0.0/24", "dhcp": true, "status": "ok"}),
        );
        // What was planned stays; only the unknowns come from meson.
        assert_eq!(state.get("name"), &V::Str("a".into()));
        assert_eq!(state.get("id"), &V::Str("x".into()));
        assert_eq!(state.get("dhcp"), &V::Bool(true));
    }

    #[test]
    fn updates_replace_on_force_new_and_unknown_volatile_in_place() {
        let b = block();
        // As Terraform sends it: every attribute and block, null or not.
        let prior = v(
            json!({"id": "x", "name": "a", "cidr": "10.0.0.0/24", "dhcp": true,
            "status": "ok", "timeouts": null}),
        );
        let (same, replace) = b.plan(&prior, &prior, &prior);
        assert!(replace.is_empty());
        assert_eq!(same, prior, "no change keeps every computed value");

        let mut renamed = prior.clone();
        if let V::Obj(m) = &mut renamed {
            m.insert("name".into(), V::Str("b".into()));
        }
        let (planned, replace) = b.plan(&prior, &renamed, &renamed);
        assert!(replace.is_empty());
        assert_eq!(planned.get("status"), &V::Unknown);
        assert_eq!(planned.get("id"), &V::Str("x".into()));

        let mut moved = prior.clone();
        if let V::Obj(m) = &mut moved {
            m.insert("cidr".into(), V::Str("10.1.0.0/24".into()));
        }
        let (_, replace) = b.plan(&prior, &moved, &moved);
        assert_eq!(replace, vec![vec![Step::Attr("cidr".into())]]);
    }

    #[test]
    fn defaults_are_planned_when_unset_and_followers_go_unknown_with_their_leader() {
        let b = Block {
            description: "",
            attrs: vec![
                Attr::computed("id", Ty::Str, ""),
                Attr::optional("on", Ty::Bool, "").default(V::Bool(false)),
                Attr::defaulted("window", Ty::Str, "").follows("on"),
                Attr::optional("keep", Ty::Num, "").default(V::Num(7.0)),
            ],
            blocks: vec![],
        };
        assert_eq!(b.attrs[1].mode, Mode::OptionalComputed);
        // Created without them: the defaults, known; the follower meson's.
        let config = v(json!({}));
        let (planned, _) = b.plan(&V::Null, &config, &config);
        assert_eq!(planned.get("on"), &V::Bool(false));
        assert_eq!(planned.get("keep"), &V::Num(7.0));
        assert_eq!(planned.get("window"), &V::Unknown);
        // Turned on: the window meson picks is unknown; a set one is kept.
        let prior = v(json!({"id": "x", "on": false, "window": null, "keep": 7}));
        let config = v(json!({"on": true}));
        let proposed = v(json!({"id": "x", "on": true, "window": null, "keep": 7}));
        let (planned, _) = b.plan(&prior, &proposed, &config);
        assert_eq!(planned.get("window"), &V::Unknown);
        let config = v(json!({"on": true, "window": "22-02"}));
        let proposed = v(json!({"id": "x", "on": true, "window": "22-02", "keep": 7}));
        let (planned, _) = b.plan(&prior, &proposed, &config);
        assert_eq!(planned.get("window"), &V::Str("22-02".into()));
        // Removed from the configuration: back to the defaults, not the
        // last values (Terraform proposes those).
        let prior = v(json!({"id": "x", "on": true, "window": "22-02", "keep": 3}));
        let (planned, _) = b.plan(&prior, &prior, &v(json!({})));
        assert_eq!(planned.get("on"), &V::Bool(false));
        assert_eq!(planned.get("keep"), &V::Num(7.0));
        assert_eq!(planned.get("window"), &V::Unknown);
        // Unchanged: nothing unknown, nothing to do.
        let config = v(json!({"on": true, "keep": 3}));
        let (planned, _) = b.plan(&prior, &prior, &config);
        assert_eq!(planned, prior);
    }

    #[test]
    fn refresh_tracks_drift_and_keeps_configuration_meson_does_not_report() {
        let b = block();
        let prior = v(
            json!({"id": "x", "name": "a", "cidr": "10.0.0.0/24", "dhcp": null,
            "status": "ok", "timeouts": {"create": "5m"}}),
        );
        let now = b.refresh(
            &prior,
            &json!({"id": "x", "name": "b", "cidr": "10.0.0.0/24", "dhcp": false, "status": "ok"}),
        );
        assert_eq!(now.get("name"), &V::Str("b".into()), "drift shows");
        assert_eq!(now.get("dhcp"), &V::Bool(false), "a null fills in");
        assert_eq!(now.get("timeouts").get("create"), &V::Str("5m".into()));
        // An import: everything from meson.
        let imported = b.refresh(&v(json!({"id": "x"})), &json!({"name": "n", "cidr": "c"}));
        assert_eq!(imported.get("cidr"), &V::Str("c".into()));
    }
}

//! Shapes every resource's requests share: labels, lenient booleans,
//! abbreviated ids, paging and sort keys (their schemas and types).

use std::collections::BTreeMap;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

/// A label value: empty, or alphanumerics, `-`, `_` and `.` between alphanumerics.
const LABEL_VALUE: &str = "^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$";
/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
const LABEL_KEY: &str = "^([a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$";

/// Labels as a request carries them (see [`LabelsRequest`] for the rules).
pub type Labels = BTreeMap<String, String>;

/// Labels: up to 64, keys `[prefix/]name` and values as in Kubernetes (63
/// characters at most: alphanumerics, `-`, `_`, `.`); the prefix
/// `meson.elemento.cloud/` is reserved. The schema of [`Labels`] fields.
pub struct LabelsRequest;

impl PartialSchema for LabelsRequest {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(63))
                    .pattern(Some(LABEL_VALUE)),
            ))
            .property_names(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(317))
                    .pattern(Some(LABEL_KEY)),
            ))
            .max_properties(Some(64))
            .examples([serde_json::json!({"env": "prod", "example.com/team": "infra"})])
            .into()
    }
}

impl ToSchema for LabelsRequest {}

/// An id, or 8 or more of its first or last hex digits (hyphens where the
/// id has them, or none). The schema of ids that may be abbreviated.
pub struct AbbreviatedId;

impl PartialSchema for AbbreviatedId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9a-fA-F](-?[0-9a-fA-F]){7,31}$"))
            .examples(["cf197d66", "019ad0c2-7b1e-7c3a-9f00-12cf197d66ab"])
            .into()
    }
}

impl ToSchema for AbbreviatedId {}

/// A boolean as clients send it: a JSON boolean, the string `"true"` or
/// `"false"` in any case (`"True"`, `"FALSE"`), or 0/1. The schema of the
/// `Option<bool>` fields read with [`lenient::opt_bool`].
pub struct LenientBool;

impl PartialSchema for LenientBool {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"))
                    .examples(["True", "False"]),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .enum_values(Some([0, 1])),
            )
            .description(Some(
                "A boolean: true/false, \"True\"/\"False\" (any case) or 0/1.",
            ))
            .into()
    }
}

impl ToSchema for LenientBool {}

/// `page` and `per_page` of a list.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page number, from 1.
    #[param(minimum = 1, default = 1)]
    pub page: Option<u32>,
    /// Entries per page.
    #[param(minimum = 1, maximum = 50, default = 25)]
    pub per_page: Option<u32>,
}

/// `cursor` of a list that pages by keyset as well as by number.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CursorQuery {
    /// The page after this cursor: a `meta.pagination.next_cursor`, taken
    /// back with the same filters and sort (not with `page`). Any page costs
    /// the same this way, and rows created or deleted meanwhile neither
    /// repeat nor skip the others.
    pub cursor: Option<String>,
}

/// A sort key of `GET /v1/vms`.
pub struct VmSort;

impl PartialSchema for VmSort {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^(id|name|status|created)(:(asc|desc))?$"))
            .examples(["created:desc"])
            .into()
    }
}

impl ToSchema for VmSort {}

/// A sort key of action lists.
pub struct ActionSort;

impl PartialSchema for ActionSort {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(
                "^(id|command|status|progress|started|finished)(:(asc|desc))?$",
            ))
            .examples(["started:desc"])
            .into()
    }
}

impl ToSchema for ActionSort {}

/// `PATCH` of a VM, a standalone volume or a network: rename and/or
/// relabel. Both optional; labels replace the resource's labels.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, ToSchema)]
pub struct NameLabelsUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 63, pattern = "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<LabelsRequest>)]
    pub labels: Option<Labels>,
}

/// Declares `$(#[meta])* pub struct Name { fields }` with more fields
/// (`[...]`, written once by the macro that calls this one) after its own.
/// The fields stay the struct's own, not a `#[serde(flatten)]`ed struct:
/// serde reads a flattened struct from a buffer that serde_path_to_error
/// cannot see into, so an error would name the struct instead of the field.
macro_rules! extended {
    (
        [$($more:tt)*]
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($fields:tt)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($fields)*
            $($more)*
        }
    };
}
pub(crate) use extended;

/// Declares a create request with the placement fields every one carries
/// (`provider`, `continent`, `region`) after its own, so that their names,
/// docs and schema are written once.
macro_rules! placed {
    ($($request:tt)*) => {
        $crate::common::extended! {
            [
                /// Place it with this provider (`ovh`, `ionos`, `gigas`,
                /// `arubacloud`, `atomos`, ...; trimmed and lowercased). Without
                /// placement fields meson picks the cheapest placement that fits.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                #[schema(example = "ionos")]
                pub provider: Option<String>,
                /// Place it on this continent (`europe`, `north-america`, ...).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub continent: Option<String>,
                /// Place it in this region.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub region: Option<String>,
            ]
            $($request)*
        }
    };
}
pub(crate) use placed;

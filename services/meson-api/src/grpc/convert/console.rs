//! Consoles: answers, and the list's filters.

use super::meta::timestamp;
use crate::app::consoles::ConsoleQuery;
use meson_core::Error;
use meson_proto::meson::v1 as pb;
use meson_types as wire;

pub fn console(c: wire::console::Console) -> pb::Console {
    pb::Console {
        id: c.id.to_string(),
        vm: c.vm.to_string(),
        status: c.status,
        requested_by: c.requested_by,
        created: Some(timestamp(c.created)),
        expires: Some(timestamp(c.expires)),
        opened: c.opened.map(timestamp),
        closed: c.closed.map(timestamp),
        close_reason: c.close_reason,
        bytes_in: u64::try_from(c.bytes_in).unwrap_or(0),
        bytes_out: u64::try_from(c.bytes_out).unwrap_or(0),
    }
}

/// `ListConsolesRequest`'s filters, read as the REST list reads its query.
pub fn console_filter(r: &pb::ListConsolesRequest) -> Result<ConsoleQuery, Error> {
    ConsoleQuery::parse(
        r.vm.as_deref(),
        r.status.iter().map(String::as_str),
        r.limit.map(|n| n.to_string()).as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use meson_core::VmId;
    use meson_core::console::ConsoleStatus;

    fn rejected(r: &pb::ListConsolesRequest) -> String {
        match console_filter(r) {
            Err(Error::InvalidInput { fields }) => fields[0].name.clone(),
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn console_filters_are_the_rest_ones() {
        assert_eq!(
            console_filter(&pb::ListConsolesRequest::default()).unwrap(),
            ConsoleQuery {
                vm: None,
                statuses: vec![],
                limit: 50
            }
        );
        let vm = VmId::new();
        let r = pb::ListConsolesRequest {
            vm: Some(vm.to_string()),
            status: vec!["requested".into(), "open, revoked".into()],
            limit: Some(100),
        };
        assert_eq!(
            console_filter(&r).unwrap(),
            ConsoleQuery {
                vm: Some(vm),
                statuses: vec![
                    ConsoleStatus::Requested,
                    ConsoleStatus::Open,
                    ConsoleStatus::Revoked
                ],
                limit: 100
            }
        );
        let bad = |f: fn(&mut pb::ListConsolesRequest)| {
            let mut r = pb::ListConsolesRequest::default();
            f(&mut r);
            rejected(&r)
        };
        assert_eq!(bad(|r| r.vm = Some("nope".into())), "vm");
        assert_eq!(bad(|r| r.vm = Some(String::new())), "vm");
        assert_eq!(bad(|r| r.status = vec!["Open".into()]), "status");
        assert_eq!(bad(|r| r.limit = Some(0)), "limit");
        assert_eq!(bad(|r| r.limit = Some(101)), "limit");
    }
}

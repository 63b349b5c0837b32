//! Cluster and pool names: lowercase DNS labels short enough that a node
//! hostname `<cluster>-<pool>-<suffix>` fits in one DNS label.

use super::{MAX_CLUSTER_NAME_LEN, MAX_POOL_NAME_LEN};
use crate::error::FieldErrors;

/// Checks a lowercase DNS label of at most `max` characters, recording the problem at `path`.
fn check_dns_name(errors: &mut FieldErrors, path: &str, name: &str, max: usize) -> bool {
    let problem = if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if name.len() > max {
        Some(format!("must be at most {max} characters"))
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some(
            "may contain only lowercase letters, digits and '-' (it names Kubernetes nodes and AtomOS VMs)"
                .to_owned(),
        )
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("must not start or end with '-'".to_owned())
    } else {
        None
    };
    match problem {
        Some(m) => {
            errors.add(path, m);
            false
        }
        None => true,
    }
}

/// Validates a cluster name (PATCH uses it too).
pub fn check_cluster_name(errors: &mut FieldErrors, path: &str, name: &str) -> bool {
    check_dns_name(errors, path, name, MAX_CLUSTER_NAME_LEN)
}

/// Validates a pool name (adding a pool uses it too).
pub fn check_pool_name(errors: &mut FieldErrors, path: &str, name: &str) -> bool {
    check_dns_name(errors, path, name, MAX_POOL_NAME_LEN)
}

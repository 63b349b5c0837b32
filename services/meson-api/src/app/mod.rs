//! The application layer: what the API can do, independent of transport.
//!
//! REST handlers (and later gRPC) call these methods; they validate, check
//! authorization, run transactions and enqueue workflows.

mod actions;
mod catalog;
mod quotes;
mod vms;
mod volumes;

use meson_db::PgPool;

pub use vms::{PowerAction, VmCreated, VmPage};

#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
}

impl App {
    pub fn new(pool: PgPool) -> Self {
        App { pool }
    }

    /// Ready when the database answers.
    pub async fn ready(&self) -> bool {
        meson_db::ping(&self.pool).await
    }
}

/// Pagination requested by a list call.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub page: u32,
    pub per_page: u32,
}

impl Page {
    pub const MAX_PER_PAGE: u32 = 50;

    pub fn offset(&self) -> i64 {
        i64::from(self.page - 1) * i64::from(self.per_page)
    }
}

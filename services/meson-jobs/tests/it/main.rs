//! meson-jobs against a real PostgreSQL: the queue's guarantees and the engine's.

mod engine;
mod queue;
mod wakeup;

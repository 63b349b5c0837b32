//! Integration tests: the simulator driven through `AtomosClient` over real HTTP.

mod common;
mod compute;
mod daemons;
mod faults;
mod flow;
mod network;
mod storage;

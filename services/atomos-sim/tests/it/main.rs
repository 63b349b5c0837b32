//! Integration tests: the simulator driven through `AtomosClient` over real HTTP.

mod backups;
mod capacity;
mod common;
mod compute;
mod consoles;
mod control;
mod daemons;
mod faults;
mod flow;
mod forwards;
mod lifecycle;
mod network;
mod phonehome;
mod state;
mod storage;

//! The attacks of the second security pass (issue #33), each against the **release** build of
//! `a2a-server` on real loopback sockets, each bound asserted, resident memory read from
//! `/proc/PID/status`. Every module prints one table row to stderr (attack, bound, measured),
//! which the closing note quotes.
//!
//! The release binary is built here (`cargo build --release --bin a2a-server`, a no-op when it
//! is fresh): what an operator runs is what is measured, and a debug build's memory and
//! timings say little about it. `tests/attacks/rss.py` replays the first pass's attacks by hand.
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;

mod credentials;
mod harness;
mod memory;
mod nesting;
mod parked;

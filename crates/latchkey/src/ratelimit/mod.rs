//! Rate limits: how often something may happen, across every process.
//!
//! Today: a fixed window (N calls per window). Sliding windows and GCRA come later.

mod fixed_window;

pub use fixed_window::{Decision, FixedWindow};

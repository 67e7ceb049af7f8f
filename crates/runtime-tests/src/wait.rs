//! Polling for readiness (a socket, a listening server). Deadlines here bound how long a
//! broken setup hangs; they are never assertions about speed.

use crate::error::{HarnessError, Result};
use std::time::{Duration, Instant};

/// One look at the thing being waited for.
pub enum Attempt<T> {
    Ready(T),
    /// Not yet; the text says what was seen, for the timeout message.
    NotYet(String),
}

/// Calls `look` with a growing pause until it is ready or `timeout` has passed.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut look: impl FnMut() -> Attempt<T>,
) -> Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        let last_seen = match look() {
            Attempt::Ready(value) => return Ok(value),
            Attempt::NotYet(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(HarnessError::Timeout {
                what: what.to_string(),
                waited: start.elapsed(),
                last_seen: Some(last_seen),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

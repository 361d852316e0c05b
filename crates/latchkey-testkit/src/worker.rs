//! Worker processes for tests that need several OS processes.
//!
//! A test binary re-runs itself: the parent [`spawn`]s the current executable with a
//! filter that selects one `#[ignore]`d entry test, and that test does the worker's
//! job only when [`is_worker`] says it was started this way. A plain `cargo test`
//! skips the entry (it is ignored); `cargo test -- --ignored` runs it as a no-op.
//!
//! ```no_run
//! #[test]
//! #[ignore = "worker process, spawned by the test below"]
//! fn worker_entry() {
//!     if !latchkey_testkit::worker::is_worker("worker_entry") {
//!         return;
//!     }
//!     // ... the worker's job ...
//! }
//!
//! #[test]
//! fn parent() {
//!     let child = latchkey_testkit::worker::spawn("worker_entry", &[("N", "1".into())]).unwrap();
//!     assert!(child.wait_with_output().unwrap().status.success());
//! }
//! ```

use std::io;
use std::process::{Child, Command, Stdio};

/// Names the entry test a worker process was started for.
const ROLE_VAR: &str = "LATCHKEY_TEST_WORKER";

/// Starts this test binary again, running only the ignored test `entry`, with `envs`.
/// Its stdout and stderr are piped; read them with `wait_with_output`.
pub fn spawn(entry: &str, envs: &[(&str, String)]) -> io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command
        .args([
            entry,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_VAR, entry)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in envs {
        command.env(name, value);
    }
    command.spawn()
}

/// Waits for a worker to exit; panics with its stderr unless it succeeded.
pub fn finish(child: Child) {
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("lost a worker: {e}"));
    assert!(
        output.status.success(),
        "worker failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// True inside a process [`spawn`]ed for `entry`.
pub fn is_worker(entry: &str) -> bool {
    std::env::var(ROLE_VAR).is_ok_and(|role| role == entry)
}

/// Runs `job` with the parent's `REDIS_URL` on a fresh tokio runtime, if this
/// process is the worker for `entry`; does nothing otherwise.
///
/// ```no_run
/// #[test]
/// #[ignore = "worker process"]
/// fn holder_worker() {
///     latchkey_testkit::worker::serve("holder_worker", |url| async move {
///         println!("would lock something on {url}");
///     });
/// }
/// ```
pub fn serve<F, Fut>(entry: &str, job: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if !is_worker(entry) {
        return;
    }
    let url = env("REDIS_URL");
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("worker runtime: {e}"));
    runtime.block_on(job(url));
}

/// Reads a variable the parent passed to this worker; panics with its name if absent
/// (a test worker has no better way to report a broken setup).
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("worker started without {name}"))
}

//! Helpers shared by the CLI's test binaries.
#![allow(dead_code)] // each test binary uses its own subset

/// The README's ACL line, with its user name and password.
pub fn readme_acl_line() -> (String, String, String) {
    let readme = include_str!("../../../../README.md");
    let line = readme
        .lines()
        .find(|line| line.starts_with("ACL SETUSER "))
        .expect("the README gives an ACL SETUSER line");
    let mut words = line.split_whitespace().skip(2);
    let user = words.next().unwrap().to_owned();
    let rules: Vec<&str> = words.collect();
    let password = rules
        .iter()
        .find_map(|rule| rule.strip_prefix('>'))
        .expect("the line sets a password")
        .to_owned();
    (user, password, rules.join(" "))
}

/// Runs the built `latchkey` with `LATCHKEY_REDIS=redis`, the prefix `myapp:` and
/// `args`, and asserts it answered: exit 0, or 1 (`status` of a name where nothing
/// is held, `throttle` over the limit); an ACL denial is 69.
pub fn latchkey_ok(redis: &str, args: &[&str]) -> std::process::Output {
    let output = in_myapp(redis, args).output().unwrap();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{args:?}: {:?} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The built `latchkey` with `LATCHKEY_REDIS=redis`, the prefix `myapp:` (the
/// README's ACL line's) and `args`.
pub fn in_myapp(redis: &str, args: &[&str]) -> std::process::Command {
    let mut command = latchkey(redis, args);
    command.env("LATCHKEY_PREFIX", "myapp:");
    command
}

/// The built `latchkey` with `LATCHKEY_REDIS=redis`, no prefix and `args`.
pub fn latchkey(redis: &str, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
    command
        .env("LATCHKEY_REDIS", redis)
        .env_remove("LATCHKEY_PREFIX")
        .env_remove("LATCHKEY_TOKEN")
        .args(args);
    command
}

/// A process a test started, killed (and reaped) when dropped: a test that fails
/// leaves nothing running. `latchkey run` passes the kill on to its command (its
/// command dies with it, see the README).
pub struct Running(Option<std::process::Child>);

impl Running {
    /// Waits for the process to exit and collects its output.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        let child = self.0.take().expect("a running process until waited for");
        child.wait_with_output()
    }
}

impl std::ops::Deref for Running {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("a running process until waited for")
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_mut().expect("a running process until waited for")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `Command::spawn` for tests: the process is stopped when the test ends.
pub trait SpawnRunning {
    /// Spawns the command; panics if it cannot start.
    fn spawn_running(&mut self) -> Running;
}

impl SpawnRunning for std::process::Command {
    fn spawn_running(&mut self) -> Running {
        Running(Some(self.spawn().expect("the process starts")))
    }
}

//! One call of a script, built as the `EVALSHA` command it is sent as.

use redis::{Cmd, ErrorKind, RedisResult, Script, ServerErrorKind, ToRedisArgs, Value};

/// `EVALSHA sha numkeys keys… args…`, written once into one command; sent again as
/// it is after `NOSCRIPT` loads the script (a restarted or flushed server).
///
/// What redis-rs's `ScriptInvocation` does, without its copies: it keeps every key
/// and argument in an allocation of its own and builds the command from them on
/// every send, about seven allocations for a release (2 keys, 1 argument), 3 % of
/// an uncontended cycle's client instructions (callgrind). The keys come first, so
/// they are given up front; arguments follow with [`arg`](Self::arg).
pub(crate) struct ScriptCall<'a> {
    script: &'a Script,
    cmd: Cmd,
    /// How many of its arguments, after the SHA and the count, are keys.
    keys: usize,
}

/// Room for the arguments a call adds after its keys, so the command's buffers
/// are not reallocated as it is written: most scripts take at most 6, of at most
/// 40 bytes (owner tokens are 32 hex digits).
const ARGS: usize = 6;
const ARG_BYTES: usize = 40;

impl<'a> ScriptCall<'a> {
    /// A call of `script` on `keys` (its `KEYS`), ready for its arguments.
    pub(crate) fn new<K: AsRef<str>>(script: &'a Script, keys: &[K]) -> Self {
        let key_bytes: usize = keys.iter().map(|key| key.as_ref().len()).sum();
        // EVALSHA, the 40-digit SHA-1 and the key count, then the keys and arguments.
        let mut cmd = Cmd::with_capacity(
            3 + keys.len() + ARGS,
            7 + 40 + 4 + key_bytes + ARGS * ARG_BYTES,
        );
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.arg(key.as_ref());
        }
        ScriptCall {
            script,
            cmd,
            keys: keys.len(),
        }
    }

    /// Its keys (`KEYS`), as sent.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        let args = self.cmd.args_iter().skip(3).take(self.keys);
        args.filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        })
    }

    /// Appends an argument (`ARGV`).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// The `EVALSHA` command, for a pipeline (which does not load the script by
    /// itself: see [`load`](Self::load)).
    pub(crate) fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// Loads the script into the server (`SCRIPT LOAD`).
    pub(crate) async fn load(&self, con: &mut impl redis::aio::ConnectionLike) -> RedisResult<()> {
        self.script.load_async(con).await.map(drop)
    }

    /// Sends the call; on `NOSCRIPT`, loads the script and sends it once more. The
    /// reply is left as it came: the caller converts it, so that a reply its type
    /// does not fit (a value another writer left, passed through by the script) is
    /// told apart from a reply that is not the Redis protocol.
    pub(crate) async fn invoke(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> RedisResult<Value> {
        match self.cmd.query_async(con).await {
            Err(error) if is_no_script(&error) => {
                self.load(con).await?;
                self.cmd.query_async(con).await
            }
            reply => reply,
        }
    }
}

/// Whether the server did not know the script (restarted, or `SCRIPT FLUSH`).
pub(crate) fn is_no_script(error: &redis::RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

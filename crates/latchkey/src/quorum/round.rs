//! One round of a quorum: the same request to several nodes at once, each within
//! its own deadline, collected until the outcome is settled.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, Stream, StreamExt};

use super::tally;
use crate::error::{Error, Result};
use crate::store::RedisStore;

/// The answers of one round, by node index; `None` for a node not asked, or not
/// yet answered when the round was settled.
pub(crate) type Answers<T> = Vec<Option<Result<T>>>;

/// Sends `call` to the nodes `asked` (indices into `nodes`) at once and collects
/// their answers until `settled` says the outcome is known or every one answered.
/// A node that does not answer within `deadline` counts as failed, so a slow or
/// stopped node never holds the round up for longer than that.
///
/// Requests still in flight when the round settles are not cancelled on the
/// server: they may still run there, which every caller allows for.
pub(crate) async fn ask<'a, T, F, Fut>(
    nodes: &'a [RedisStore],
    asked: &[usize],
    deadline: Duration,
    call: F,
    settled: impl FnMut(&Answers<T>) -> bool,
) -> Answers<T>
where
    F: Fn(&'a RedisStore) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let pending: FuturesUnordered<_> = asked
        .iter()
        .map(|&index| {
            let node = &nodes[index];
            // `map`, not an async block: a block awaiting the request it captured
            // would hold it twice (rustc does not overlap the two), and a round's
            // requests are moved into the set as they are collected.
            within(deadline, node.node(), call(node)).map(move |reply| (index, Some(reply)))
        })
        .collect();
    gather(nodes.len(), pending, settled).await
}

/// Like [`ask`], but the requests run in a task of their own, each to completion
/// even after the round settled or its deadline passed: for takes and releases,
/// which must reach every node however early the caller stops waiting. Only the
/// waiting is cut off at the deadline; every request is still written (a request
/// whose caller stopped waiting before the connection wrote it would otherwise be
/// skipped), and the task ends with the connections' own reply timeout.
///
/// One task for the round, not one per node: a task costs the client an allocation
/// the size of its future and a wake-up, and the round's requests share one
/// deadline anyway (all are sent at once).
pub(crate) async fn ask_detached<T, F, Fut>(
    nodes: &[RedisStore],
    asked: &[usize],
    deadline: Duration,
    call: F,
    mut settled: impl FnMut(&Answers<T>) -> bool,
) -> Answers<T>
where
    T: Send + 'static,
    F: Fn(RedisStore) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let (sender, mut replies) = tokio::sync::mpsc::unbounded_channel();
    let requests: FuturesUnordered<_> = asked
        .iter()
        .map(|&index| {
            // A request that panics must not take the others down with the task:
            // it counts as a node that did not answer (`None`), as in a task of
            // its own.
            // (`map`: see `ask`.)
            AssertUnwindSafe(call(nodes[index].clone()))
                .catch_unwind()
                .map(move |reply| (index, reply.ok()))
        })
        .collect();
    tokio::spawn(requests.for_each(move |reply| {
        // The round may have settled, and stopped listening: nothing to tell.
        let _ = sender.send(reply);
        std::future::ready(())
    }));
    let mut answers: Answers<T> = (0..nodes.len()).map(|_| None).collect();
    let gathered = tokio::time::timeout(deadline, async {
        while let Some((index, reply)) = replies.recv().await {
            let reply = reply.unwrap_or_else(|| Err(Error::no_reply(nodes[index].node())));
            answers[index] = Some(reply);
            if settled(&answers) {
                return true;
            }
        }
        false
    })
    .await;
    if gathered == Ok(true) {
        return answers;
    }
    // The nodes yet to answer fail one by one, as their own deadlines would.
    for &index in asked {
        if answers[index].is_some() {
            continue;
        }
        let name = nodes[index].node();
        answers[index] = Some(Err(match gathered {
            Err(_) => Error::no_reply_within(name, deadline),
            // Every request ended without this node's reply: the runtime is
            // shutting down.
            Ok(_) => Error::no_reply(name),
        }));
        if settled(&answers) {
            break;
        }
    }
    answers
}

/// `request`'s reply, or a no-reply error naming `node` once `deadline` passed.
/// (Not an `async fn`, for the reason `ask` gives.)
fn within<T>(
    deadline: Duration,
    node: &str,
    request: impl Future<Output = Result<T>>,
) -> impl Future<Output = Result<T>> {
    tokio::time::timeout(deadline, request)
        .map(move |reply| reply.unwrap_or_else(|_| Err(Error::no_reply_within(node, deadline))))
}

/// Collects the replies of `pending` (node index, reply if any) into the answers of
/// `nodes` nodes until `settled` says the outcome is known or none is left.
async fn gather<T>(
    nodes: usize,
    mut pending: impl Stream<Item = (usize, Option<Result<T>>)> + Unpin,
    mut settled: impl FnMut(&Answers<T>) -> bool,
) -> Answers<T> {
    let mut answers: Answers<T> = (0..nodes).map(|_| None).collect();
    while let Some((index, reply)) = pending.next().await {
        answers[index] = reply;
        if settled(&answers) {
            break;
        }
    }
    answers
}

/// How many of `answers` are replies for which `is` holds.
pub(crate) fn count<T>(answers: &Answers<T>, is: impl Fn(&T) -> bool) -> usize {
    answers
        .iter()
        .filter(|a| matches!(a, Some(Ok(value)) if is(value)))
        .count()
}

/// The usual end of a round that asked `asked` nodes and needs `needed` of them to
/// say yes (by `is_yes`): settled once they did, or once the nodes yet to answer
/// could no longer make it (see [`tally::settled`]).
pub(crate) fn until_decided<T>(
    asked: usize,
    needed: usize,
    is_yes: impl Fn(&T) -> bool,
) -> impl FnMut(&Answers<T>) -> bool {
    move |answers| {
        let yes = count(answers, &is_yes);
        let no = answers.iter().flatten().count() - yes;
        tally::settled(asked, needed, yes, no).is_some()
    }
}

/// Every node's index, to ask them all.
pub(crate) fn all(nodes: &[RedisStore]) -> Vec<usize> {
    (0..nodes.len()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use latchkey_testkit::RedisServer;

    /// What [`ask_detached`] promises its callers (takes and releases): every
    /// request runs to its end, even after the round settled, and one that
    /// panics is a node that did not answer, not the end of the others.
    #[tokio::test]
    async fn a_request_that_panics_leaves_the_others_to_run_to_their_end() {
        let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
        let mut nodes = Vec::new();
        for server in &servers {
            nodes.push(RedisStore::open(&server.url()).await.unwrap());
        }
        let broken = nodes[0].node().to_owned();
        let set = |node: RedisStore| {
            let broken = broken.clone();
            async move {
                assert_ne!(node.node(), broken, "a bug in one node's request");
                // Answers after the round settled on the broken node's "answer".
                tokio::time::sleep(Duration::from_millis(100)).await;
                let set = redis::cmd("SET").arg("landed").arg("1").clone();
                node.query::<()>(&set)
                    .await
                    .map_err(|error| node.error(error, "landed"))
            }
        };
        let first_answer = |answers: &Answers<()>| answers.iter().flatten().count() >= 1;
        let answers = ask_detached(
            &nodes,
            &all(&nodes),
            Duration::from_secs(5),
            set,
            first_answer,
        )
        .await;
        assert!(matches!(answers[0], Some(Err(Error::Unreachable { .. }))));
        assert!(answers[1].is_none() && answers[2].is_none());
        tokio::time::sleep(Duration::from_millis(800)).await;
        for server in &servers[1..] {
            let landed: Option<String> = redis::cmd("GET")
                .arg("landed")
                .query(&mut server.connection().unwrap())
                .unwrap();
            assert_eq!(landed.as_deref(), Some("1"), "a request was cut short");
        }
    }
}

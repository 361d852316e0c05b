//! Which names under a prefix have latchkey state: the keys SCAN finds, read back
//! into the names they belong to.

use crate::error::Result;
use crate::key::split_companion;
use crate::store::{Inspect, RedisStore};

/// The names (prefix included) matching `prefix + pattern` that have a key: a
/// string that may be a lock, or a companion of any primitive. Three SCAN passes,
/// because a name's keys take three shapes: the lock key itself (`app:job`), the
/// companions of a name without a hash tag (`{app:job}:lk:…`), and those of a name
/// with one (`app:{u1}:cart:lk:…`). Sorted, without duplicates.
pub(super) async fn matching(
    store: &RedisStore,
    prefix: &str,
    pattern: &str,
) -> Result<Vec<String>> {
    let glob = format!("{}{pattern}", escape_glob(prefix));
    let mut names = store.scan(&glob).await?;
    for key in store.scan_keys(&format!("{{{glob}}}:lk:*"), None).await? {
        names.extend(owner_of(&key).and_then(untagged_name).map(str::to_owned));
    }
    for key in store.scan_keys(&format!("{glob}:lk:*"), None).await? {
        names.extend(owner_of(&key).and_then(tagged_name).map(str::to_owned));
    }
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// The companion kinds that only a lock of the name keeps (its fencing counter,
/// queue, leases, or a quorum's released values): a name found by one of them has
/// nothing but a lock.
const LOCK_ONLY: [&str; 4] = ["fence", "queue", "leases", "ended"];

/// The name (prefix included) that any key of a deployment may belong to: the
/// name a companion key serves, or the key itself (a lock, or a key that is not
/// latchkey's at all: reading it says which); and whether the key says the name
/// may hold more than a lock (a semaphore's, read-write lock's or rate limit's
/// companion), so that it must be read whole.
pub(crate) fn name_of(key: &str) -> Option<(&str, bool)> {
    let Some((inner, kind)) = split_companion(key) else {
        return Some((key, false));
    };
    // A namespaced primitive's companion (`{pool}:lk:sem:lk:fence`) names it by the
    // outer kind.
    let (owner, kind) = split_companion(inner).unwrap_or((inner, kind));
    let name = untagged_name(owner).or_else(|| tagged_name(owner))?;
    Some((name, !LOCK_ONLY.contains(&kind)))
}

/// `X` for the companions' owner `{X}` of an untagged name `X`.
fn untagged_name(owner: &str) -> Option<&str> {
    let name = owner.strip_prefix('{')?.strip_suffix('}')?;
    // An untagged name has no '}' (it may have a '{' that opens nothing).
    (!name.contains('}')).then_some(name)
}

/// The owner itself when it is a name with a hash tag of its own; `{X}` alone is
/// the tagged form of the untagged `X`, never a name of its own.
fn tagged_name(owner: &str) -> Option<&str> {
    (crate::key::hash_tag(owner).is_some() && !only_tag(owner)).then_some(owner)
}

/// Whether `name` is a hash tag and nothing else (`{X}`).
fn only_tag(name: &str) -> bool {
    crate::key::hash_tag(name).is_some_and(|tag| name.len() == tag.len() + 2)
}

/// The name part of a companion key: the key less one or two `:lk:<kind>` suffixes
/// (`{pool}:lk:sem:lk:fence` → `{pool}`); `None` for another key.
fn owner_of(key: &str) -> Option<&str> {
    let (rest, _) = split_companion(key)?;
    Some(split_companion(rest).map_or(rest, |(outer, _)| outer))
}

/// `text` with Redis glob's special characters escaped, so a prefix matches itself.
pub(crate) fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companions_lead_back_to_their_name() {
        assert_eq!(owner_of("{pool}:lk:sem:lk:fence"), Some("{pool}"));
        assert_eq!(owner_of("{job}:lk:fence"), Some("{job}"));
        assert_eq!(owner_of("app:{u1}:cart:lk:rate"), Some("app:{u1}:cart"));
        assert_eq!(owner_of("{pool}:lk:sem"), Some("{pool}"));
        assert_eq!(owner_of("user:1:name"), None);
        assert_eq!(owner_of("{x}:lk:other"), None);
    }

    #[test]
    fn every_key_leads_to_the_name_it_may_serve() {
        assert_eq!(name_of("{pool}:lk:sem:lk:fence"), Some(("pool", true)));
        assert_eq!(name_of("{pool}:lk:sem"), Some(("pool", true)));
        assert_eq!(name_of("{job}:lk:queue"), Some(("job", false)));
        assert_eq!(name_of("{job}:lk:fence"), Some(("job", false)));
        assert_eq!(
            name_of("app:{u1}:cart:lk:rate"),
            Some(("app:{u1}:cart", true))
        );
        assert_eq!(name_of("app:{u1}:cart"), Some(("app:{u1}:cart", false)));
        assert_eq!(name_of("job"), Some(("job", false)));
        assert_eq!(name_of("user:1:name"), Some(("user:1:name", false)));
        assert_eq!(name_of("{a}b}:lk:fence"), Some(("{a}b}", false)));
    }
}

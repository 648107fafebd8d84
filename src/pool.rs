//! The pool of instances (`--pool-topic`): what an instance reports of
//! itself ([`Instance`]: its role and the model version it serves), and the
//! view an instance keeps of the reports it reads ([`View`]: a tombstone
//! takes a member out, and one not heard from for [`GONE_AFTER_MS`]
//! leaves). Pure: the Kafka transport moves the reports, a console shows
//! the view.

use std::collections::BTreeMap;

/// A member not heard from for this long has left the pool (its key
/// stays on the compacted topic when it was killed: no tombstone), so the
/// view stays bounded by the instances of the last minutes.
pub(crate) const GONE_AFTER_MS: u64 = 10 * 60 * 1000;

/// An instance of the pool as its last report says.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub(crate) struct Instance {
    /// Its name (`host-pid`, unique while it runs).
    pub instance: String,
    pub role: String,
    /// The model version it serves (a learner: the one it learned to).
    pub model_version: u64,
    /// When it reported (ms since the epoch).
    pub at_ms: u64,
    /// When it started.
    pub started_ms: u64,
}

/// The pool as the reports read so far say.
#[derive(Debug, Default)]
pub(crate) struct View {
    seen: BTreeMap<String, Instance>,
    /// Whether the view was handed out since it was made.
    shown: bool,
}

impl View {
    /// One report read: `value` a member's report (one that does not
    /// parse is skipped), or none, a tombstone for the member `key` (an
    /// instance that stopped cleanly).
    pub(crate) fn read(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        match value {
            None => {
                if let Some(key) = key.and_then(|k| std::str::from_utf8(k).ok()) {
                    self.seen.remove(key);
                }
            }
            Some(v) => {
                if let Ok(member) = serde_json::from_slice::<Instance>(v) {
                    self.seen.insert(member.instance.clone(), member);
                }
            }
        }
    }

    /// The members, newest report first, at `now_ms` (those silent for
    /// [`GONE_AFTER_MS`] dropped), when the view changed since the last
    /// call (`read`: reports read since) or was never handed out.
    pub(crate) fn changed(&mut self, read: usize, now_ms: u64) -> Option<Vec<Instance>> {
        let before = self.seen.len();
        self.seen.retain(|_, m| now_ms.saturating_sub(m.at_ms) <= GONE_AFTER_MS);
        if read == 0 && self.seen.len() == before && self.shown {
            return None;
        }
        self.shown = true;
        let mut members: Vec<Instance> = self.seen.values().cloned().collect();
        members.sort_by_key(|m| std::cmp::Reverse(m.at_ms));
        Some(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(instance: &str, at_ms: u64) -> Vec<u8> {
        let m = Instance {
            instance: instance.into(),
            role: "predictor".into(),
            model_version: 7,
            at_ms,
            started_ms: 0,
        };
        serde_json::to_vec(&m).unwrap_or_default()
    }

    #[test]
    fn a_tombstone_takes_a_member_out_and_a_silent_one_leaves() {
        let mut view = View::default();
        view.read(Some(b"a"), Some(&instance("a", 1_000)));
        view.read(Some(b"b"), Some(&instance("b", 2_000)));
        view.read(Some(b"x"), Some(b"not json"));
        let all = view.changed(3, 2_000).unwrap_or_default();
        assert_eq!(all.iter().map(|m| m.instance.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(view.changed(0, 2_000), None, "nothing new: nothing handed out");
        view.read(Some(b"b"), None);
        let left = view.changed(1, 2_000).unwrap_or_default();
        assert_eq!(left.len(), 1);
        let gone = view.changed(0, 1_000 + GONE_AFTER_MS + 1).unwrap_or_default();
        assert!(gone.is_empty(), "a member silent for ten minutes has left");
    }

    #[test]
    fn an_empty_view_is_handed_out_once() {
        let mut view = View::default();
        assert_eq!(view.changed(0, 0), Some(vec![]));
        assert_eq!(view.changed(0, 0), None);
    }
}

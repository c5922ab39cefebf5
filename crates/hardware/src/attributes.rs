//! A candidate's facts in a compact form: a host holds one set per
//! candidate, tens of thousands of them, for as long as the hardware is
//! there. A sorted boxed slice of (key, value) pairs, each key one shared
//! copy per distinct name in the process (`pci.vendor` is stored once, not
//! once per GPU), each value a boxed string: 32 bytes a fact plus the
//! value's text, where a `BTreeMap<String, String>` takes a 500-byte node
//! for even one fact.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Facts under dotted keys, sorted by key, each key once. Built from
/// pairs ([`FromIterator`], later pairs replacing earlier ones of the same
/// key) or from a map; read like a map.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    pairs: Box<[(Arc<str>, Box<str>)]>,
}

/// The one shared copy of `key`.
fn intern(key: &str) -> Arc<str> {
    static KEYS: OnceLock<Mutex<HashSet<Arc<str>>>> = OnceLock::new();
    let mut keys = KEYS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(shared) = keys.get(key) {
        return Arc::clone(shared);
    }
    let shared: Arc<str> = Arc::from(key);
    keys.insert(Arc::clone(&shared));
    shared
}

impl Attributes {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.pairs[i].1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Every (key, value), sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.pairs.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Every key, sorted.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.pairs.iter().map(|(k, _)| &**k)
    }

    /// How many facts there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl<K: AsRef<str>, V: Into<Box<str>>> FromIterator<(K, V)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut pairs: Vec<(Arc<str>, Box<str>)> = iter
            .into_iter()
            .map(|(k, v)| (intern(k.as_ref()), v.into()))
            .collect();
        // Stable: of pairs with one key, the last stays (as a map insert).
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<(Arc<str>, Box<str>)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match unique.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => unique.push(pair),
            }
        }
        Self {
            pairs: unique.into_boxed_slice(),
        }
    }
}

impl From<BTreeMap<String, String>> for Attributes {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, Box<str>)>,
        fn(&'a (Arc<str>, Box<str>)) -> (&'a str, &'a str),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.pairs.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = str;
    /// The value of `key`; panics when absent (as a map's index does).
    fn index(&self, key: &str) -> &str {
        self.get(key)
            .unwrap_or_else(|| panic!("no attribute {key:?}"))
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl serde::Serialize for Attributes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

#[cfg(test)]
#[path = "attributes_tests.rs"]
mod tests;

//! An ordered set that also counts: a treap whose nodes know their subtree's size, so finding
//! a position, counting the keys before it and stepping to the next key are all O(log n).
//!
//! ListTasks needs exactly that: a page is "the next k keys after the cursor" and its total is
//! "how many keys before a bound"; `std`'s `BTreeSet` can walk a range cheaply but can only
//! count one by walking it, which is the O(n) scan this index exists to avoid.
//!
//! Priorities come from a keyed generator, never from the keys, so no choice of task ids or
//! timestamps can unbalance the tree: its depth is O(log n) with overwhelming probability, and
//! the recursive split and merge stay shallow (about 40 levels at a million keys).
use std::hash::{BuildHasher, RandomState};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

type Tree<K> = Option<Box<Node<K>>>;

struct Node<K> {
    key: K,
    priority: u64,
    /// Keys in this subtree, this one included.
    size: usize,
    left: Tree<K>,
    right: Tree<K>,
}

/// An ordered set of `K` with O(log n) insert, remove, seek and rank.
pub struct Ranked<K> {
    root: Tree<K>,
}

impl<K> Default for Ranked<K> {
    fn default() -> Self {
        Self { root: None }
    }
}

impl<K: Ord> Ranked<K> {
    /// How many keys the set holds.
    pub fn len(&self) -> usize {
        size(&self.root)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Adds `key`; returns false (and leaves the set alone) if it is there already.
    pub fn insert(&mut self, key: K) -> bool {
        let priority = priority();
        let node = Box::new(Node { key, priority, size: 1, left: None, right: None });
        match insert(&mut self.root, node) {
            Ok(()) => true,
            Err(node) => {
                // The walk counted a key that was there already: uncount it (rare, so the
                // common case is one walk, not a lookup and then the walk).
                recount(&mut self.root, &node.key, -1, priority);
                false
            }
        }
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&mut self, key: &K) -> bool {
        let removed = remove(&mut self.root, key);
        if !removed {
            recount(&mut self.root, key, 1, 0);
        }
        removed
    }

    /// How many keys satisfy `before`, which must hold for a prefix of the order and for no
    /// key after it (e.g. "is newer than T" in a newest-first order).
    pub fn count_while(&self, before: impl Fn(&K) -> bool) -> usize {
        let (mut node, mut count) = (&self.root, 0);
        while let Some(n) = node {
            if before(&n.key) {
                count += size(&n.left) + 1;
                node = &n.right;
            } else {
                node = &n.left;
            }
        }
        count
    }

    /// The keys in order, starting with the first one for which `skip` is false (`skip` must
    /// hold for a prefix, as in [`Self::count_while`]). Costs O(log n), then O(1) amortised
    /// per key taken.
    pub fn iter_from(&self, skip: impl Fn(&K) -> bool) -> Iter<'_, K> {
        let mut stack = Vec::new();
        let mut node = &self.root;
        while let Some(n) = node {
            if skip(&n.key) {
                node = &n.right;
            } else {
                stack.push(&**n);
                node = &n.left;
            }
        }
        Iter { stack }
    }
}

/// Keys in order from a starting point; see [`Ranked::iter_from`].
pub struct Iter<'a, K> {
    /// The nodes still to visit, the next on top; each one's left subtree is done.
    stack: Vec<&'a Node<K>>,
}

impl<'a, K> Iterator for Iter<'a, K> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        let node = self.stack.pop()?;
        let mut next = &node.right;
        while let Some(n) = next {
            self.stack.push(n);
            next = &n.left;
        }
        Some(&node.key)
    }
}

fn size<K>(tree: &Tree<K>) -> usize {
    tree.as_ref().map_or(0, |n| n.size)
}

fn resize<K>(node: &mut Node<K>) {
    node.size = 1 + size(&node.left) + size(&node.right);
}

/// Puts `node` where its priority belongs: one walk down, counting it in every subtree it
/// enters, and a split of the one subtree it takes over (a save moves a task in four indexes,
/// so this is on every call's path). If its key is there already it gives the node back,
/// with the walk's counts left for [`recount`] to undo.
fn insert<K: Ord>(tree: &mut Tree<K>, mut node: Box<Node<K>>) -> Result<(), Box<Node<K>>> {
    match tree {
        Some(top) if top.priority >= node.priority => {
            let side = match node.key.cmp(&top.key) {
                std::cmp::Ordering::Less => &mut top.left,
                std::cmp::Ordering::Greater => &mut top.right,
                std::cmp::Ordering::Equal => return Err(node),
            };
            top.size += 1;
            insert(side, node)
        }
        _ => {
            if find(tree, &node.key) {
                return Err(node);
            }
            let (left, right) = split(tree.take(), &|k: &K| *k < node.key);
            node.left = left;
            node.right = right;
            resize(&mut node);
            *tree = Some(node);
            Ok(())
        }
    }
}

/// Takes `key` out: one walk down, uncounting it in every subtree it enters, and a merge of
/// its two subtrees. Whether it was there (if not, [`recount`] undoes the walk's counts).
fn remove<K: Ord>(tree: &mut Tree<K>, key: &K) -> bool {
    let Some(top) = tree else { return false };
    let side = match key.cmp(&top.key) {
        std::cmp::Ordering::Less => &mut top.left,
        std::cmp::Ordering::Greater => &mut top.right,
        std::cmp::Ordering::Equal => {
            if let Some(mut found) = tree.take() {
                *tree = merge(found.left.take(), found.right.take());
            }
            return true;
        }
    };
    top.size -= 1;
    remove(side, key)
}

/// Whether `key` is in `tree`.
fn find<K: Ord>(mut tree: &Tree<K>, key: &K) -> bool {
    while let Some(n) = tree {
        tree = match key.cmp(&n.key) {
            std::cmp::Ordering::Less => &n.left,
            std::cmp::Ordering::Greater => &n.right,
            std::cmp::Ordering::Equal => return true,
        };
    }
    false
}

/// Adds `delta` to the size of every node on the path to `key` down to a node of a lower
/// priority than `priority`, `key` itself or the end of the path: the undo of the counts of
/// an [`insert`] (of that priority) that found the key there, or of a [`remove`] (priority 0)
/// that found it missing. Neither changed the tree's shape, so the path is the walk's.
fn recount<K: Ord>(mut tree: &mut Tree<K>, key: &K, delta: isize, priority: u64) {
    while let Some(n) = tree {
        if n.priority < priority {
            return;
        }
        let side = match key.cmp(&n.key) {
            std::cmp::Ordering::Less => &mut n.left,
            std::cmp::Ordering::Greater => &mut n.right,
            std::cmp::Ordering::Equal => return,
        };
        n.size = n.size.wrapping_add_signed(delta);
        tree = side;
    }
}

/// Splits into the keys for which `goes_left` holds (a prefix) and the rest.
fn split<K>(tree: Tree<K>, goes_left: &impl Fn(&K) -> bool) -> (Tree<K>, Tree<K>) {
    let Some(mut node) = tree else { return (None, None) };
    if goes_left(&node.key) {
        let (left, right) = split(node.right.take(), goes_left);
        node.right = left;
        resize(&mut node);
        (Some(node), right)
    } else {
        let (left, right) = split(node.left.take(), goes_left);
        node.left = right;
        resize(&mut node);
        (left, Some(node))
    }
}

/// Joins two trees, every key of `left` before every key of `right`.
fn merge<K>(left: Tree<K>, right: Tree<K>) -> Tree<K> {
    match (left, right) {
        (None, tree) | (tree, None) => tree,
        (Some(mut l), Some(mut r)) => {
            if l.priority > r.priority {
                l.right = merge(l.right.take(), Some(r));
                resize(&mut l);
                Some(l)
            } else {
                r.left = merge(Some(l), r.left.take());
                resize(&mut r);
                Some(r)
            }
        }
    }
}

/// A fresh node priority: a counter through SipHash under a per-process random key, so the
/// sequence is unpredictable from outside and independent of the keys.
fn priority() -> u64 {
    static KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    KEY.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Against `BTreeSet` over a random mix of inserts and removes: the same keys, in order,
    /// the same ranks, and every subtree size right.
    #[test]
    fn behaves_like_a_btreeset_that_counts() {
        let mut ranked = Ranked::default();
        let mut reference = BTreeSet::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..20_000 {
            let key = next() % 2_000;
            if next() % 3 == 0 {
                assert_eq!(ranked.remove(&key), reference.remove(&key), "remove {key}");
            } else {
                assert_eq!(ranked.insert(key), reference.insert(key), "insert {key}");
            }
            if round % 1_000 == 0 {
                check_sizes(&ranked.root);
                let bound = next() % 2_000;
                assert_eq!(ranked.count_while(|k| *k < bound), reference.range(..bound).count());
                let from: Vec<_> = ranked.iter_from(|k| *k < bound).take(50).copied().collect();
                let expected: Vec<_> = reference.range(bound..).take(50).copied().collect();
                assert_eq!(from, expected);
            }
        }
        assert_eq!(ranked.len(), reference.len());
        assert!(ranked.iter_from(|_| false).copied().eq(reference.iter().copied()));
        assert!(ranked.iter_from(|_| true).next().is_none());
        for key in reference {
            assert!(ranked.remove(&key));
        }
        assert!(ranked.is_empty());
    }

    #[test]
    fn stays_shallow_on_sorted_input() {
        let mut ranked = Ranked::default();
        for key in 0..100_000u32 {
            ranked.insert(key);
        }
        assert!(depth(&ranked.root) < 80, "depth {}", depth(&ranked.root));
        assert_eq!(ranked.count_while(|k| *k < 12_345), 12_345);
    }

    fn check_sizes<K>(tree: &Tree<K>) -> usize {
        let Some(node) = tree else { return 0 };
        let size = 1 + check_sizes(&node.left) + check_sizes(&node.right);
        assert_eq!(node.size, size);
        size
    }

    fn depth<K>(tree: &Tree<K>) -> usize {
        tree.as_ref().map_or(0, |n| 1 + depth(&n.left).max(depth(&n.right)))
    }
}

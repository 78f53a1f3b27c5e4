//! A generational slab: values held in reusable slots and named by a key
//! that is the slot index with a generation above it (`generation << 32 |
//! index`). A lookup is an index and a compare (no hashing); a slot's
//! generation moves on whenever its value leaves it, so a key handed out
//! before never finds what the slot holds now (until the 32-bit generation
//! wraps, 2^32 reuses of one slot later); once the slab has held its most
//! values at once, nothing allocates.
//!
//! It serves the tables whose entries come and go: the NBD client's
//! requests by cookie, and the NBD server's connections (the key is also
//! the poller token) and its requests at the map. The core queue keeps its
//! own fixed slot array, written in place: see docs/ARCHITECTURE.md
//! ("Hand-written on purpose") for the measured cost of a slab there.

/// A slab of `T` values keyed by generational `u64` keys.
///
/// # Invariants
/// `free` holds exactly the indices of the slots whose value is `None`,
/// each once.
#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A new slot's generation: 1, not 0, so that no key is a bare index.
const FIRST_GENERATION: u32 = 1;

/// The index part of `key`.
#[inline(always)]
fn index_of(key: u64) -> u32 {
    key as u32
}

#[inline(always)]
fn key(generation: u32, index: u32) -> u64 {
    u64::from(generation) << 32 | u64::from(index)
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab::with_capacity(0)
    }
}

impl<T> Slab<T> {
    /// A slab with room for `capacity` values before it allocates.
    pub fn with_capacity(capacity: usize) -> Self {
        Slab {
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
        }
    }

    /// Values held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// True when no value is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds `value` (in the slot freed last, if any); returns its key.
    #[inline(always)]
    pub fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                assert!(self.slots.len() < u32::MAX as usize, "slab full");
                self.slots.push(Slot {
                    generation: FIRST_GENERATION,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.value.is_none(), "a free slot is empty");
        slot.value = Some(value);
        key(slot.generation, index)
    }

    /// The key the next [`Slab::insert`] returns, for a value that must be
    /// named (registered, say) before it is held.
    pub fn next_key(&self) -> u64 {
        match self.free.last() {
            Some(&index) => key(self.slots[index as usize].generation, index),
            None => key(FIRST_GENERATION, self.slots.len() as u32),
        }
    }

    #[inline(always)]
    fn slot(&self, key: u64) -> Option<&Slot<T>> {
        self.slots
            .get(index_of(key) as usize)
            .filter(|slot| slot.generation == (key >> 32) as u32)
    }

    /// The value of `key`, if held.
    #[inline(always)]
    pub fn get(&self, key: u64) -> Option<&T> {
        self.slot(key)?.value.as_ref()
    }

    /// The value of `key`, writable, if held.
    #[inline(always)]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        self.slot(key)?;
        self.slots[index_of(key) as usize].value.as_mut()
    }

    /// Takes the value of `key` out, if held; the slot's generation moves
    /// on, so `key` finds nothing from now on.
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<T> {
        self.slot(key)?;
        self.remove_at(index_of(key))
    }

    /// Takes the value in slot `index` out, if one is held there; the
    /// slot's generation moves on.
    #[inline(always)]
    fn remove_at(&mut self, index: u32) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        Some(value)
    }

    /// The held values with their keys, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            let value = slot.value.as_ref()?;
            Some((key(slot.generation, index as u32), value))
        })
    }

    /// The held values with their keys, writable, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(index, slot)| {
                let generation = slot.generation;
                let value = slot.value.as_mut()?;
                Some((key(generation, index as u32), value))
            })
    }

    /// Takes every value out, handing each to `sink`.
    pub fn drain(&mut self, mut sink: impl FnMut(T)) {
        for index in 0..self.slots.len() as u32 {
            if let Some(value) = self.remove_at(index) {
                sink(value);
            }
        }
    }
}

/// The value of a key the caller knows is held.
///
/// # Panics
/// If `key` holds nothing: a key the caller's own bookkeeping says is
/// held and is not is a broken invariant.
impl<T> std::ops::Index<u64> for Slab<T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, key: u64) -> &T {
        self.get(key).expect("a slab key that holds nothing")
    }
}

impl<T> std::ops::IndexMut<u64> for Slab<T> {
    #[inline(always)]
    fn index_mut(&mut self, key: u64) -> &mut T {
        self.get_mut(key).expect("a slab key that holds nothing")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_find_their_value_and_never_a_reused_slot() {
        let mut slab = Slab::with_capacity(2);
        let first = slab.insert("a");
        let second = slab.insert("b");
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.get(first), Some(&"a"));
        assert_eq!(slab.remove(first), Some("a"));
        assert_eq!(slab.remove(first), None, "removed once");
        assert_eq!(index_of(slab.next_key()), index_of(first));
        let next = slab.next_key();
        let third = slab.insert("c");
        assert_eq!(third, next);
        assert_eq!(index_of(third), index_of(first), "the slot is reused");
        assert_ne!(third, first, "under a new key");
        assert_eq!(slab.get(first), None);
        assert_eq!(slab.get_mut(third).map(|value| *value), Some("c"));
        assert_eq!(slab.get(99), None);
        assert_eq!(slab.get(u64::from(index_of(second))), None, "no bare index");
        let mut held: Vec<_> = slab.iter().map(|(key, value)| (key, *value)).collect();
        held.sort_unstable();
        assert_eq!(held, [(second, "b"), (third, "c")]);
        for (_, value) in slab.iter_mut() {
            *value = "x";
        }
        let mut drained = Vec::new();
        slab.drain(|value| drained.push(value));
        assert_eq!(drained, ["x", "x"]);
        assert!(slab.is_empty());
        assert_eq!(slab.get(second), None);
        slab.insert("d");
        let next = slab.next_key();
        assert_eq!(slab.insert("e"), next);
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.slots.len(), 2, "no slot beyond the most held");
        let fresh = slab.next_key();
        assert_eq!((index_of(fresh), fresh >> 32), (2, 1));
    }

    #[test]
    fn generations_wrap_past_the_top() {
        let mut slab = Slab::default();
        let first = slab.insert(());
        slab.slots[0].generation = u32::MAX;
        slab.remove_at(0);
        let wrapped = slab.insert(());
        assert_eq!(wrapped >> 32, 0);
        assert_eq!(slab.get(wrapped), Some(&()));
        assert_eq!(slab.get(first), None);
    }

    #[test]
    fn nothing_allocates_once_the_most_held_were_held() {
        let mut slab = Slab::with_capacity(4);
        let mut keys: Vec<_> = (0..4).map(|value| slab.insert(value)).collect();
        let capacity = (slab.slots.capacity(), slab.free.capacity());
        for round in 0..100 {
            for key in keys.drain(..) {
                slab.remove(key);
            }
            keys.extend((0..4).map(|value| slab.insert(value + round)));
        }
        assert_eq!((slab.slots.capacity(), slab.free.capacity()), capacity);
    }
}

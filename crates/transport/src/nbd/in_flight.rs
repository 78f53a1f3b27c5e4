//! The requests one connection has in flight, by cookie: a slab whose
//! cookie is the slot index with a generation above it, so a lookup is an
//! index (no hashing), a reused slot never answers to an old cookie, and
//! nothing allocates once the table has held its depth of entries.

/// A slab of in-flight entries keyed by cookie.
///
/// # Invariants
/// `free` holds exactly the indices of the slots whose `entry` is `None`.
#[derive(Debug)]
pub struct InFlightTable<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    entry: Option<T>,
}

impl<T> InFlightTable<T> {
    /// A table with room for `depth` entries before it allocates.
    pub fn with_capacity(depth: usize) -> Self {
        InFlightTable {
            slots: Vec::with_capacity(depth),
            free: Vec::with_capacity(depth),
        }
    }

    /// Entries held: every slot but the free ones.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds `entry`; returns its cookie.
    pub fn insert(&mut self, entry: T) -> u64 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.entry.is_none(), "a free slot is empty");
        slot.generation = slot.generation.wrapping_add(1);
        slot.entry = Some(entry);
        u64::from(slot.generation) << 32 | u64::from(index)
    }

    fn slot(&self, cookie: u64) -> Option<&Slot<T>> {
        self.slots
            .get(cookie as u32 as usize)
            .filter(|slot| slot.generation == (cookie >> 32) as u32)
    }

    /// The entry of `cookie`, if held.
    pub fn get(&self, cookie: u64) -> Option<&T> {
        self.slot(cookie)?.entry.as_ref()
    }

    /// The entry of `cookie`, writable, if held.
    pub fn get_mut(&mut self, cookie: u64) -> Option<&mut T> {
        self.slot(cookie)?;
        self.slots[cookie as u32 as usize].entry.as_mut()
    }

    /// Takes the entry of `cookie` out, if held.
    pub fn remove(&mut self, cookie: u64) -> Option<T> {
        self.slot(cookie)?;
        let index = cookie as u32;
        let entry = self.slots[index as usize].entry.take()?;
        self.free.push(index);
        Some(entry)
    }

    /// True if any held entry satisfies `predicate`.
    pub fn any(&self, predicate: impl FnMut(&T) -> bool) -> bool {
        self.slots
            .iter()
            .filter_map(|slot| slot.entry.as_ref())
            .any(predicate)
    }

    /// Calls `each` on every held entry, writable.
    pub fn for_each_mut(&mut self, each: impl FnMut(&mut T)) {
        self.slots
            .iter_mut()
            .filter_map(|slot| slot.entry.as_mut())
            .for_each(each);
    }

    /// Takes every entry out, handing each to `sink`.
    pub fn drain(&mut self, mut sink: impl FnMut(T)) {
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if let Some(entry) = slot.entry.take() {
                self.free.push(index as u32);
                sink(entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_find_their_entry_and_never_a_reused_slot() {
        let mut table = InFlightTable::with_capacity(2);
        let first = table.insert("a");
        let second = table.insert("b");
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(first), Some(&"a"));
        assert_eq!(table.remove(first), Some("a"));
        assert_eq!(table.remove(first), None, "removed once");
        let third = table.insert("c");
        assert_eq!(third as u32, first as u32, "the slot is reused");
        assert_ne!(third, first, "under a new cookie");
        assert_eq!(table.get(first), None);
        assert_eq!(table.get_mut(third).map(|entry| *entry), Some("c"));
        assert!(table.any(|entry| *entry == "b"));
        assert_eq!(table.get(99), None);
        let mut drained = Vec::new();
        table.drain(|entry| drained.push(entry));
        drained.sort_unstable();
        assert_eq!(drained, ["b", "c"]);
        assert!(table.is_empty());
        assert_eq!(table.get(second), None);
        table.insert("d");
        table.insert("e");
        assert_eq!(table.len(), 2);
    }
}

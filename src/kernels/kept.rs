//! A bounded table of values under byte-string keys, compared in full, that looks up a
//! batch of keys at once.
//!
//! [`super::KernelTimes`] looks up about 1,500 keys a configuration (every small kernel
//! body, every kernel class) in tables of hundreds of MB, far beyond the caches: one at
//! a time, each lookup waits for its slot, then for its stored key, two misses in a
//! row. [`Kept::get_many`] hashes the whole batch and asks for every slot first, then
//! for every candidate key, then compares: the misses of the batch overlap.
//!
//! Each generation is an open-addressing table (linear probing, at most half full) of
//! slots holding a key's 64-bit hash, where its bytes are in the generation's arena and its
//! value. A hash only points at a candidate: a key is found when its bytes equal the
//! stored key's. When the young generation is full the old one is forgotten and the
//! young one becomes old; a key found in the old one moves to the young one, so the keys
//! found again stay (a bound on memory, not on correctness).

use std::hash::BuildHasher;
use std::num::NonZeroU64;

/// One slot (an empty slot is `None`, in the same bytes: the tag is never 0).
#[derive(Clone, Copy)]
struct Slot<V> {
    /// The key's hash with its lowest bit set.
    tag: NonZeroU64,
    /// Where the key's bytes start: chunk `at >> CHUNK_BITS`, at `at & (CHUNK - 1)`.
    at: u32,
    len: u32,
    value: V,
}

/// One generation: slots and the bytes of their keys.
struct Generation<V> {
    slots: Vec<Option<Slot<V>>>,
    /// The keys' bytes, in chunks of [`CHUNK`] bytes allocated whole (a key never
    /// spans two): a growing arena would copy itself, twice its size for a moment.
    arena: Vec<Vec<u8>>,
    len: usize,
}

const CHUNK_BITS: u32 = 20;
/// Bytes of an arena chunk (and of a key at most: a longer one is not kept).
const CHUNK: usize = 1 << CHUNK_BITS;

impl<V: Copy> Generation<V> {
    fn new(slots: usize) -> Self {
        Generation {
            slots: vec![None; slots],
            arena: Vec::new(),
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn key(&self, s: &Slot<V>) -> &[u8] {
        let at = (s.at & (CHUNK as u32 - 1)) as usize;
        &self.arena[(s.at >> CHUNK_BITS) as usize][at..at + s.len as usize]
    }

    /// The first slot from `home` on whose tag is `tag`, or none when an empty slot
    /// comes first.
    fn candidate(&self, home: usize, tag: NonZeroU64) -> Option<usize> {
        let mask = self.mask();
        let mut i = home & mask;
        while let Some(s) = &self.slots[i] {
            if s.tag == tag {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The slot holding `key`.
    fn find(&self, home: usize, tag: NonZeroU64, key: &[u8]) -> Option<usize> {
        let mask = self.mask();
        let mut i = home & mask;
        while let Some(s) = &self.slots[i] {
            if s.tag == tag && self.key(s) == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Twice the slots, each key in its place for the new count (its home is its
    /// tag's, [`Kept::place`]).
    fn grow(&mut self) {
        let twice = vec![None; 2 * self.slots.len()];
        let old = std::mem::replace(&mut self.slots, twice);
        let mask = self.mask();
        for s in old.into_iter().flatten() {
            let mut i = Kept::<V>::place(s.tag.get()).0 & mask;
            while self.slots[i].is_some() {
                i = (i + 1) & mask;
            }
            self.slots[i] = Some(s);
        }
    }

    /// Where `key`'s bytes would go ([`Slot::at`]): at the end of the last chunk, or at
    /// the start of a new one; none when the arena is full (2^32 bytes).
    fn room(&self, key: &[u8]) -> Option<u32> {
        match self.arena.last() {
            Some(c) if c.len() + key.len() <= CHUNK => {
                Some(((self.arena.len() - 1) << CHUNK_BITS | c.len()) as u32)
            }
            _ => (self.arena.len() < 1 << (32 - CHUNK_BITS))
                .then_some((self.arena.len() << CHUNK_BITS) as u32),
        }
    }

    /// The address of the byte at `at` ([`Slot::at`]), to prefetch.
    fn byte(&self, at: usize) -> *const u8 {
        let c = &self.arena[at >> CHUNK_BITS];
        c.as_ptr().wrapping_add(at & (CHUNK - 1))
    }

    /// Keeps `value` under `key` (not kept yet: the caller looked it up) at `at`
    /// ([`Generation::room`]), with twice the slots first when half of them are taken.
    fn put(&mut self, home: usize, tag: NonZeroU64, key: &[u8], at: u32, value: V) {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = home & mask;
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(Slot {
            tag,
            at,
            len: key.len() as u32,
            value,
        });
        if (at as usize) >> CHUNK_BITS == self.arena.len() {
            self.arena.push(Vec::with_capacity(CHUNK));
        }
        if let Some(c) = self.arena.last_mut() {
            c.extend_from_slice(key);
        }
        self.len += 1;
    }
}

/// Asks the cache for the line at `p` (a hint: never faults, changes no value).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault, whatever the
    // address; SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where a key of a batch may be: a generation (0 young, 1 old) and a slot.
type Candidate = Option<(u8, usize)>;

/// Values under byte-string keys, two bounded generations (see the module documentation).
pub(crate) struct Kept<V> {
    young: Generation<V>,
    old: Generation<V>,
    /// Keys a generation holds at most.
    per_generation: usize,
    /// Scratch of [`Kept::get_many`].
    hashes: Vec<u64>,
    candidates: Vec<Candidate>,
}

impl<V: Copy> Kept<V> {
    /// An empty table of generations of at most `per_generation` keys.
    pub(crate) fn new(per_generation: usize) -> Self {
        let per_generation = per_generation.max(1);
        Kept {
            young: Generation::new(Self::FIRST_SLOTS),
            old: Generation::new(1),
            per_generation,
            hashes: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// Slots of a new generation (a power of two; doubled as it fills).
    const FIRST_SLOTS: usize = 1024;

    fn hash(key: &[u8]) -> u64 {
        foldhash::fast::FixedState::default().hash_one(key)
    }

    /// A key's home slot (any slot count: masked by the generation) and tag; the
    /// same of the tag as of the hash.
    fn place(hash: u64) -> (usize, NonZeroU64) {
        ((hash >> 16) as usize, NonZeroU64::MIN | hash)
    }

    /// Keys kept now.
    pub(crate) fn len(&self) -> usize {
        self.young.len + self.old.len
    }

    /// The value kept under each of `keys`, in order, into `out` (cleared first).
    pub(crate) fn get_many(&mut self, keys: &[&[u8]], out: &mut Vec<Option<V>>) {
        out.clear();
        let mut hashes = std::mem::take(&mut self.hashes);
        let mut candidates = std::mem::take(&mut self.candidates);
        hashes.clear();
        candidates.clear();
        // 1. every key's home slots
        for key in keys {
            let h = Self::hash(key);
            hashes.push(h);
            let (home, _) = Self::place(h);
            prefetch(&self.young.slots[home & self.young.mask()]);
            prefetch(&self.old.slots[home & self.old.mask()]);
        }
        // 2. every key's candidate slot, and its stored key
        for &h in &hashes {
            let (home, tag) = Self::place(h);
            let c = match self.young.candidate(home, tag) {
                Some(i) => Some((0, i)),
                None => self.old.candidate(home, tag).map(|i| (1, i)),
            };
            if let Some((g, i)) = c {
                let gen = if g == 0 { &self.young } else { &self.old };
                if let Some(s) = &gen.slots[i] {
                    for line in (0..s.len as usize).step_by(64) {
                        prefetch(gen.byte(s.at as usize + line));
                    }
                }
            }
            candidates.push(c);
        }
        // 3. the keys compared in full
        let mut promote = Vec::new();
        for (k, (key, &c)) in keys.iter().zip(&candidates).enumerate() {
            let (home, tag) = Self::place(hashes[k]);
            let same = |gen: &Generation<V>, i: usize| {
                gen.slots[i]
                    .as_ref()
                    .filter(|s| gen.key(s) == *key)
                    .map(|s| s.value)
            };
            let found = match c {
                Some((0, i)) => same(&self.young, i),
                Some((_, i)) => same(&self.old, i).inspect(|_| promote.push(k)),
                None => None,
            };
            // two keys of one hash: rare, searched in full
            let found = found.or_else(|| {
                c.and_then(|_| {
                    if let Some(i) = self.young.find(home, tag, key) {
                        return same(&self.young, i);
                    }
                    let i = self.old.find(home, tag, key)?;
                    promote.push(k);
                    same(&self.old, i)
                })
            });
            out.push(found);
        }
        // 4. the keys found old, young again
        for k in promote {
            if let Some(v) = out[k] {
                self.insert_hashed(keys[k], hashes[k], v);
            }
        }
        self.hashes = hashes;
        self.candidates = candidates;
    }

    /// Keeps `value` under `key` (replacing nothing: a key is kept once in the young
    /// generation).
    pub(crate) fn insert(&mut self, key: &[u8], value: V) {
        self.insert_hashed(key, Self::hash(key), value);
    }

    fn insert_hashed(&mut self, key: &[u8], hash: u64, value: V) {
        let (home, tag) = Self::place(hash);
        if key.len() > CHUNK || self.young.find(home, tag, key).is_some() {
            return;
        }
        let at = match self.young.room(key) {
            Some(at) if self.young.len < self.per_generation => at,
            _ => {
                let fresh = Generation::new(Self::FIRST_SLOTS);
                self.old = std::mem::replace(&mut self.young, fresh);
                0
            }
        };
        self.young.put(home, tag, key, at, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("key {i} {}", "x".repeat(i % 37)).into_bytes())
            .collect()
    }

    #[test]
    fn finds_what_it_keeps_and_nothing_else() {
        let mut t = Kept::new(1000);
        let ks = keys(600);
        for (i, k) in ks.iter().enumerate().step_by(2) {
            t.insert(k, i as u32);
        }
        assert_eq!(t.len(), 300);
        let batch: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
        let mut out = Vec::new();
        t.get_many(&batch, &mut out);
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, (i % 2 == 0).then_some(i as u32), "key {i}");
        }
        // a prefix of a kept key is another key
        t.get_many(&[&ks[0][..ks[0].len() - 1]], &mut out);
        assert_eq!(out, vec![None]);
    }

    #[test]
    fn generations_keep_the_keys_found_again() {
        let mut t = Kept::new(100);
        let ks = keys(250);
        let mut out = Vec::new();
        for (i, k) in ks[..100].iter().enumerate() {
            t.insert(k, i);
        }
        // the 101st key starts a generation: the first 100 become old
        t.insert(&ks[100], 100);
        assert_eq!(t.len(), 101);
        // found old: moved to the young generation
        t.get_many(&[&ks[7], &ks[100]], &mut out);
        assert_eq!(out, vec![Some(7), Some(100)]);
        assert_eq!(t.young.len, 2);
        // 98 more fill the young generation; the next forgets the old one
        for (i, k) in ks[101..199].iter().enumerate() {
            t.insert(k, 101 + i);
        }
        t.insert(&ks[199], 199);
        assert_eq!(t.len(), 101);
        t.get_many(&[&ks[7], &ks[8], &ks[199]], &mut out);
        assert_eq!(out, vec![Some(7), None, Some(199)]);
    }

    #[test]
    fn keys_of_one_hash_are_told_apart() {
        // every key in one home slot with one tag: only the bytes tell them apart
        let tag = NonZeroU64::MIN | (9 << 16);
        let home = Kept::<usize>::place(tag.get()).0;
        let mut g = Generation::new(8);
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            let at = g.room(*k).expect("room");
            g.put(home, tag, *k, at, i);
        }
        assert_eq!(g.find(home, tag, b"c"), Some(11 & g.mask()));
        assert_eq!(g.find(home, tag, b"d"), None);
        assert_eq!(g.candidate(home, tag), Some(9 & g.mask()));
        // the fifth key doubles the slots: each found again from its home
        g.put(home, tag, b"d", 3, 3);
        assert_eq!(g.slots.len(), 8);
        g.put(home, tag, b"e", 4, 4);
        assert_eq!(g.slots.len(), 16);
        for (i, k) in [b"a", b"b", b"c", b"d", b"e"].iter().enumerate() {
            let at = g.find(home, tag, *k).expect("kept");
            assert_eq!(g.slots[at].map(|s| s.value), Some(i));
        }
        assert_eq!(std::mem::size_of::<Option<Slot<Option<f64>>>>(), 32);
    }

    #[test]
    fn keys_go_in_chunks_whole() {
        let mut t = Kept::new(10);
        let big = vec![7u8; CHUNK - 10];
        t.insert(&big, 1);
        // 20 bytes do not fit after it: they start the second chunk
        t.insert(&[1; 20], 2);
        assert_eq!(t.young.arena.len(), 2);
        assert_eq!(t.young.arena[1].len(), 20);
        // a key longer than a chunk is not kept
        t.insert(&vec![0u8; CHUNK + 1], 3);
        assert_eq!(t.len(), 2);
        let mut out = Vec::new();
        t.get_many(&[&big, &[1; 20], &[1; 19]], &mut out);
        assert_eq!(out, vec![Some(1), Some(2), None]);
    }
}

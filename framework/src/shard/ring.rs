//! The ring: which replica owns which part of the hash space, derived by
//! every replica alike from the set of live members.
//!
//! The 64-bit hash space of KEP-5866 (`FNV-1a(metadata.uid)` or of
//! `metadata.namespace`) is cut into [`SLOTS`] equal slices — the ring's
//! virtual nodes. A slot goes to the member with the highest rendezvous
//! weight for it that still has room, slots taken in order: every member
//! owns ⌊128/n⌋ slots and the first `128 mod n` to need one more get it
//! (⌈128/n⌉), so the
//! ring itself is balanced to within one slot (under 9% at 10 members),
//! and objects, whose hashes are uniform, follow within sampling noise.
//! When a member joins or leaves, a slot moves only if its top choice
//! changed or the load cap pushed it; `tests` measure how many.
//!
//! A set of slots is a [`Slots`] bit set, written in a member's Lease as 32
//! hex digits and on the wire as `shardRange` terms, one per run of
//! adjacent slots.

use std::fmt;

/// How many slots (virtual nodes) the hash space is cut into.
pub const SLOTS: usize = 128;

/// The end of the hash space, as KEP-5866 writes it (`2^64`).
const SPACE_END: u128 = 1 << 64;

/// A set of slots.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Slots(u128);

impl Slots {
    /// No slot.
    pub const NONE: Slots = Slots(0);
    /// Every slot: the whole hash space.
    pub const ALL: Slots = Slots(u128::MAX);

    /// The slot holding `hash`: its top 7 bits.
    #[must_use]
    pub fn slot_of(hash: u64) -> usize {
        (hash >> 57) as usize
    }

    /// The set holding only `slot` (`slot < SLOTS`).
    #[must_use]
    pub fn one(slot: usize) -> Slots {
        Slots(1 << slot)
    }

    /// Whether `hash` falls in one of these slots.
    #[must_use]
    pub fn contains_hash(self, hash: u64) -> bool {
        self.0 & (1 << Self::slot_of(hash)) != 0
    }

    /// Whether `slot` is in the set.
    #[must_use]
    pub fn contains(self, slot: usize) -> bool {
        slot < SLOTS && self.0 & (1 << slot) != 0
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many slots.
    #[must_use]
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Slots in either.
    #[must_use]
    pub fn union(self, other: Slots) -> Slots {
        Slots(self.0 | other.0)
    }

    /// Slots in both.
    #[must_use]
    pub fn intersection(self, other: Slots) -> Slots {
        Slots(self.0 & other.0)
    }

    /// Slots in `self` and not in `other`.
    #[must_use]
    pub fn minus(self, other: Slots) -> Slots {
        Slots(self.0 & !other.0)
    }

    /// The runs of adjacent slots as hash ranges `[start, end)`; `end` may
    /// be `2^64`.
    #[must_use]
    pub fn ranges(self) -> Vec<(u64, u128)> {
        let width = SPACE_END / SLOTS as u128;
        let mut out = Vec::new();
        let mut slot = 0;
        while slot < SLOTS {
            if !self.contains(slot) {
                slot += 1;
                continue;
            }
            let start = slot;
            while slot < SLOTS && self.contains(slot) {
                slot += 1;
            }
            out.push(((start as u128 * width) as u64, slot as u128 * width));
        }
        out
    }

    /// The KEP-5866 `shardSelector` selecting these slots by `field`
    /// (`object.metadata.uid` or `object.metadata.namespace`); `None` for
    /// no slot (a selector names at least one range).
    #[must_use]
    pub fn selector(self, field: &str) -> Option<String> {
        let terms: Vec<String> = self
            .ranges()
            .into_iter()
            .map(|(start, end)| format!("shardRange({field}, '0x{start:016x}', '0x{end:016x}')"))
            .collect();
        (!terms.is_empty()).then(|| terms.join(" || "))
    }

    /// The set as 32 lowercase hex digits (slot 0 is the lowest bit).
    #[must_use]
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    /// A set written by [`to_hex`](Self::to_hex).
    ///
    /// # Errors
    /// The text is not 1 to 32 hex digits.
    pub fn from_hex(s: &str) -> Result<Slots, std::num::ParseIntError> {
        u128::from_str_radix(s, 16).map(Slots)
    }
}

impl fmt::Debug for Slots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slots({} of {SLOTS}: {})", self.len(), self.to_hex())
    }
}

/// Which member owns each slot, for one set of members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    members: Vec<String>,
    owner: Vec<usize>,
}

impl Ring {
    /// The ring of `members` (duplicates and order do not matter: every
    /// replica that sees the same members derives the same ring).
    #[must_use]
    pub fn new<I, S>(members: I) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        if members.is_empty() {
            return Ring {
                members,
                owner: Vec::new(),
            };
        }
        let seeds: Vec<u64> = members
            .iter()
            .map(|m| ward_base::fnv1a(m.as_bytes()))
            .collect();
        // Every member gets `lo` slots; `extra` of them one more.
        let (lo, extra) = (SLOTS / members.len(), SLOTS % members.len());
        let mut topped = 0;
        let mut load = vec![0usize; members.len()];
        let mut owner = Vec::with_capacity(SLOTS);
        let mut order: Vec<usize> = (0..members.len()).collect();
        for slot in 0..SLOTS {
            // Highest weight first; ties (never seen, but possible) by name.
            order.sort_by_key(|&m| {
                std::cmp::Reverse((weight(seeds[m], slot), std::cmp::Reverse(m)))
            });
            let m = *order
                .iter()
                .find(|&&m| load[m] < lo || (load[m] == lo && topped < extra))
                .expect("lo * members + extra = SLOTS leaves room");
            load[m] += 1;
            if load[m] > lo {
                topped += 1;
            }
            owner.push(m);
        }
        Ring { members, owner }
    }

    /// The members, sorted.
    #[must_use]
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The slots `member` owns (none if it is not a member).
    #[must_use]
    pub fn slots_of(&self, member: &str) -> Slots {
        let Ok(i) = self.members.binary_search_by(|m| m.as_str().cmp(member)) else {
            return Slots::NONE;
        };
        self.owner
            .iter()
            .enumerate()
            .filter(|&(_, &o)| o == i)
            .fold(Slots::NONE, |s, (slot, _)| s.union(Slots::one(slot)))
    }

    /// The member owning `hash`, if the ring has members.
    #[must_use]
    pub fn owner_of(&self, hash: u64) -> Option<&str> {
        self.owner
            .get(Slots::slot_of(hash))
            .map(|&m| self.members[m].as_str())
    }
}

/// A member's rendezvous weight for a slot: SplitMix64's finalizer over
/// both, so that members with similar names spread evenly.
fn weight(member: u64, slot: usize) -> u64 {
    use ward_base::rng::{GOLDEN_GAMMA, mix64};
    mix64(member ^ (slot as u64).wrapping_mul(GOLDEN_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("controller-{i}")).collect()
    }

    #[test]
    fn slots_partition_the_space_and_render_as_kep_ranges() {
        assert_eq!(Slots::slot_of(0), 0);
        assert_eq!(Slots::slot_of(u64::MAX), SLOTS - 1);
        let s = Slots::one(0).union(Slots::one(1)).union(Slots::one(127));
        assert_eq!(
            s.ranges(),
            vec![(0, 1 << 58), (0xfe00_0000_0000_0000, 1 << 64)]
        );
        assert_eq!(
            s.selector("object.metadata.uid").unwrap(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0400000000000000') || \
             shardRange(object.metadata.uid, '0xfe00000000000000', '0x10000000000000000')"
        );
        assert_eq!(Slots::NONE.selector("object.metadata.uid"), None);
        assert_eq!(Slots::from_hex(&s.to_hex()).unwrap(), s);
        assert!(Slots::from_hex("xyz").is_err());
        assert!(s.contains_hash(u64::MAX) && !s.contains_hash(1 << 60));
        assert_eq!(Slots::ALL.ranges(), vec![(0, 1 << 64)]);
    }

    #[test]
    fn every_slot_has_one_owner_and_loads_differ_by_at_most_one() {
        for n in 1..=16 {
            let ring = Ring::new(names(n));
            let mut all = Slots::NONE;
            let mut loads = Vec::new();
            for m in ring.members() {
                let mine = ring.slots_of(m);
                assert!(all.intersection(mine).is_empty(), "{n} members: overlap");
                all = all.union(mine);
                loads.push(mine.len());
            }
            assert_eq!(all, Slots::ALL, "{n} members: a slot without owner");
            let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            assert!(hi - lo <= 1, "{n} members: loads {loads:?}");
        }
        assert_eq!(Ring::new(Vec::<String>::new()).owner_of(7), None);
        assert_eq!(Ring::new(names(3)).slots_of("stranger"), Slots::NONE);
    }

    #[test]
    fn the_ring_depends_only_on_the_set_of_members() {
        let mut shuffled = names(5);
        shuffled.reverse();
        shuffled.push("controller-2".into());
        assert_eq!(Ring::new(names(5)), Ring::new(shuffled));
    }

    /// I4 of the sharding campaign: 2 to 10 replicas, 1,000 and 10,000
    /// objects with random uids (seeded), every replica within ±30% of
    /// the mean.
    #[test]
    fn objects_spread_within_30_percent_of_the_mean() {
        let mut rng = ward_base::Rng::new(5866);
        for objects in [1_000usize, 10_000] {
            let hashes: Vec<u64> = (0..objects)
                .map(|_| {
                    let uid = format!("{:016x}-{:016x}", rng.next_u64(), rng.next_u64());
                    ward_base::fnv1a(uid.as_bytes())
                })
                .collect();
            for n in 2..=10 {
                let ring = Ring::new(names(n));
                let mean = objects as f64 / n as f64;
                for m in ring.members() {
                    let mine = ring.slots_of(m);
                    let count = hashes.iter().filter(|&&h| mine.contains_hash(h)).count();
                    let off = (count as f64 - mean).abs() / mean;
                    assert!(
                        off <= 0.30,
                        "{objects} objects, {n} replicas: {m} has {count} (mean {mean})"
                    );
                }
            }
        }
    }

    /// How much moves when one member joins: the share of slots whose
    /// owner changes, against the minimum `1/(n+1)`.
    #[test]
    fn a_join_moves_at_most_twice_the_minimum() {
        for n in 1..=9 {
            let before = Ring::new(names(n));
            let after = Ring::new(names(n + 1));
            let moved = (0..SLOTS)
                .filter(|&s| {
                    let h = (s as u64) << 57;
                    before.owner_of(h) != after.owner_of(h)
                })
                .count();
            let minimum = SLOTS.div_ceil(n + 1);
            assert!(
                moved <= 2 * minimum,
                "{n} -> {}: {moved} slots moved (minimum {minimum})",
                n + 1
            );
        }
    }
}

// The W-TinyLFU eviction order of an `EvictionIndex`: which entry `popVictim()` removes, and the
// sequence it would follow if called until the index is empty.
//
// Every decision reads the region heads, the window's size against its target, the sketch, the
// victim's incumbency and last request, and the admission mode, none of which a pop changes but
// for the entries it moves. So `victim`, `popVictim()` and `entriesInEvictionOrder` agree, and a
// walk follows the pops with a cursor: a candidate that wins its duel goes to probation's tail,
// which the walk reaches after probation's own entries. Protected gives a victim only once
// probation is empty, and then its entries not hit since they last moved first, oldest first, then
// the others, oldest first: a pop steps them down with their second chances
// (`demoteProtectedHead(secondChances:)`), and the walk passes over protected twice.

/// Where a walk through the W-TinyLFU eviction order stands.
@usableFromInline
struct AdmissionCursor {
    /// The next window entry, probation entry and protected entry, or -1.
    ///
    /// `protected` is where the walk through protected resumes: the entry itself may not be of the
    /// pass under way (see ``protectedPassIsMarked``); `EvictionIndex.mainVictim(_:)` finds the next
    /// one that is.
    @usableFromInline var window: Int32
    @usableFromInline var probation: Int32
    @usableFromInline var protected: Int32
    /// Whether the walk through protected is in its second pass, over the entries hit since they
    /// last moved (the first pass takes the others).
    @usableFromInline var protectedPassIsMarked = false
    /// The window's size once the entries before the cursor are gone.
    @usableFromInline var windowCount: Int
    /// The candidates that won their duels, which `popVictim()` moves to probation's tail, in order.
    @usableFromInline var admitted: [Int32] = []
    /// How many of `admitted` are gone.
    @usableFromInline var admittedRemoved = 0

    @inlinable
    init(window: Int32, probation: Int32, protected: Int32, windowCount: Int) {
        self.window = window
        self.probation = probation
        self.protected = protected
        self.windowCount = windowCount
    }

}

extension EvictionIndex {
    /// What ``popVictim()`` does to the index as it stands: the slot it removes, and the window
    /// candidate it moves to probation (-1 if none).
    ///
    /// Always inlined, as are the two below: called from `popAdmissionVictim()`, a mutating method,
    /// without inlining, they were handed a copy of the whole index, and an evicting set ran 5 %
    /// more instructions (cachegrind: 2 247 per set against 2 130).
    @inlinable @inline(__always)
    func admissionChoice() -> (victim: Int32, admitted: Int32) {
        let probation = lists[Int(Self.probationRegion)].head
        let main = probation >= 0 ? probation : protectedVictim
        return admissionChoice(
            window: lists[Int(Self.windowRegion)].head,
            main: main,
            windowCount: admission.windowCount
        )
    }

    /// The eviction rule, for a window whose oldest entry is `window` (or -1) and holds `windowCount`
    /// entries, and main's victim `main` (or -1).
    ///
    /// While the window holds less than its target, main's victim goes and the window grows. Once it
    /// holds its target, its oldest entry (the candidate) meets main's victim: if the candidate is
    /// admitted (see `AdmissionState.admits`), the victim goes and the candidate moves to probation;
    /// otherwise the candidate goes.
    @inlinable @inline(__always)
    func admissionChoice(window: Int32, main: Int32, windowCount: Int) -> (victim: Int32, admitted: Int32) {
        if main < 0 { return (window, -1) }
        if window < 0 || windowCount < admission.windowTarget { return (main, -1) }
        return admits(window, over: main) ? (main, window) : (window, -1)
    }

    /// Whether the window entry `candidate` replaces the main entry `victim`.
    @inlinable @inline(__always)
    func admits(_ candidate: Int32, over victim: Int32) -> Bool {
        if admission.admitsAll { return true }
        return AdmissionState.admits(
            candidateFrequency: admission.sketch.frequency(FrequencySketch.spread(tag: tags[Int(candidate)])),
            victimFrequency: admission.sketch.frequency(FrequencySketch.spread(tag: tags[Int(victim)])),
            victimIsIncumbent: entries[Int(victim)].stamp & AdmissionState.incumbentBit != 0,
            victimIdleTime: admission.idleTime(since: entries[Int(victim)].stamp),
            idleThreshold: admission.idleThreshold
        )
    }

    /// The protected entry that steps down first when probation is empty: the oldest not hit since it
    /// last moved, or the oldest when every one was (see `demoteProtectedHead(secondChances:)`); -1
    /// when protected is empty.
    ///
    /// - Complexity: O(the marked entries at protected's oldest end).
    @inlinable
    var protectedVictim: Int32 {
        let head = lists[Int(Self.protectedRegion)].head
        let unmarked = nextProtected(from: head, marked: false)
        return unmarked >= 0 ? unmarked : head
    }

    /// `slot` or the first protected entry after it that is marked as hit since it last moved
    /// (`marked`) or not; -1 if none.
    @inlinable
    func nextProtected(from slot: Int32, marked: Bool) -> Int32 {
        var slot = slot
        while slot >= 0 && (entries[Int(slot)].stamp & AdmissionState.referencedBit != 0) != marked {
            slot = links[Int(slot)].next
        }
        return slot
    }

    /// Main's next victim after `cursor`: probation's oldest entry, counting the candidates moved to
    /// its tail, else protected's next in the walk's two passes; -1 when main is empty.
    @inlinable
    func mainVictim(_ cursor: inout AdmissionCursor) -> Int32 {
        if cursor.probation >= 0 { return cursor.probation }
        if cursor.admittedRemoved < cursor.admitted.count { return cursor.admitted[cursor.admittedRemoved] }
        cursor.protected = nextProtected(from: cursor.protected, marked: cursor.protectedPassIsMarked)
        if cursor.protected < 0 && !cursor.protectedPassIsMarked {
            cursor.protectedPassIsMarked = true
            cursor.protected = nextProtected(from: lists[Int(Self.protectedRegion)].head, marked: true)
        }
        return cursor.protected
    }

    /// A walk through the eviction order from its start.
    @usableFromInline
    var admissionCursor: AdmissionCursor {
        AdmissionCursor(
            window: lists[Int(Self.windowRegion)].head,
            probation: lists[Int(Self.probationRegion)].head,
            protected: lists[Int(Self.protectedRegion)].head,
            windowCount: admission.windowCount
        )
    }

    /// The next slot in the eviction order after `cursor`, which it advances; -1 at the end.
    ///
    /// It is the slot `popVictim()` would remove if it had removed the entries before `cursor`.
    @usableFromInline
    func nextAdmissionVictim(_ cursor: inout AdmissionCursor) -> Int32 {
        let main = mainVictim(&cursor)
        let (victim, admitted) = admissionChoice(window: cursor.window, main: main, windowCount: cursor.windowCount)
        guard victim >= 0 else { return -1 }
        if victim == cursor.window {
            cursor.window = links[Int(victim)].next
            cursor.windowCount -= 1
        } else if victim == cursor.probation {
            cursor.probation = links[Int(victim)].next
        } else if cursor.admittedRemoved < cursor.admitted.count {
            cursor.admittedRemoved += 1
        } else {
            cursor.protected = links[Int(victim)].next
        }
        if admitted >= 0 {
            cursor.admitted.append(admitted)
            cursor.window = links[Int(admitted)].next
            cursor.windowCount -= 1
        }
        return victim
    }

    /// The key removed next other than `key`.
    @usableFromInline
    func admissionVictim(excluding key: Key) -> Key? {
        var cursor = admissionCursor
        let first = nextAdmissionVictim(&cursor)
        guard first >= 0 else { return nil }
        if entries[Int(first)].key != key { return entries[Int(first)].key }
        let second = nextAdmissionVictim(&cursor)
        return second >= 0 ? entries[Int(second)].key : nil
    }

    /// The slot of every entry in the order `popVictim()` would remove them, with its estimated
    /// frequency (at least 1) as its count.
    ///
    /// - Complexity: O(n).
    @usableFromInline
    var admissionSlotsInEvictionOrder: [(slot: Int32, count: UInt32)] {
        var result: [(slot: Int32, count: UInt32)] = []
        result.reserveCapacity(entries.count)
        var cursor = admissionCursor
        while true {
            let slot = nextAdmissionVictim(&cursor)
            guard slot >= 0 else { break }
            let frequency = admission.sketch.frequency(FrequencySketch.spread(tag: tags[Int(slot)]))
            result.append((slot, UInt32(max(1, frequency))))
        }
        return result
    }
}

/// A coherent cache's state: whether the local levels may take copies from the shared level, and
/// the longest a local copy lives.
///
/// The gate is open while the shared level's invalidations are known to arrive (tracking confirmed)
/// and closed otherwise (before the first confirmation, and from a loss of tracking to the next
/// confirmation). While it is closed the local levels are bypassed: nothing is stored in memory or on
/// disk, so every read goes to the shared level.
@usableFromInline
final class CoherenceGate: @unchecked Sendable {
    // Safe because `isOpenStorage` is written only while holding every key stripe's lock
    // (`KeyStripes.changeAll`) and read only while holding one of them: each reader sees the value
    // of the last writer, and a change of it is ordered with every change of every key.

    /// Whether invalidations are tracked (`false` for ``CacheCoherence/ttlOnly(maxAge:)``: the gate
    /// then stays open).
    let tracksInvalidations: Bool
    /// The longest a value lives in memory or on disk, in seconds.
    let maxLocalAge: Double
    /// Whether the local copies keep serving while tracking is lost (see
    /// ``CacheCoherence/Outage/serveLocalCopies``).
    let servesDuringOutage: Bool
    private var isOpenStorage: Bool
    /// Whether the shared level's invalidations are known to arrive (see ``isTracked``).
    private var isTrackedStorage: Bool
    /// The disk clears begun after a loss and not finished yet: the disk level serves nothing
    /// while one is under way, even once the gate opens again (its entries may predate the loss).
    private var diskClearsStorage = 0

    init(_ coherence: CacheCoherence) {
        tracksInvalidations = coherence.tracksInvalidations
        maxLocalAge = coherence.maxLocalSeconds
        servesDuringOutage = coherence.duringOutage == .serveLocalCopies
        isOpenStorage = !coherence.tracksInvalidations
        isTrackedStorage = !coherence.tracksInvalidations
    }

    /// Whether the shared level's invalidations are known to arrive (always without tracking).
    ///
    /// Only then does a fill go to disk. An open gate without it (before the first tracked connection, or
    /// during a loss, with ``CacheCoherence/Outage/serveLocalCopies``) keeps fills in memory: the disk
    /// is shared with tracked processes, and a process that dies before tracking comes back never
    /// drops what it filled there. Read it holding a key stripe's lock.
    var isTracked: Bool { isTrackedStorage }

    /// Notes whether invalidations arrive; call it holding every key stripe's lock.
    func setTracked(_ isTracked: Bool) {
        isTrackedStorage = isTracked || !tracksInvalidations
    }

    /// Whether the local levels may store values; read it holding a key stripe's lock.
    var isOpen: Bool { isOpenStorage }

    /// Whether the disk level may serve reads: the gate is open and no disk clear is under way
    /// (`true` without tracking); read it holding a key stripe's lock.
    @usableFromInline
    var servesDisk: Bool { isOpenStorage && diskClearsStorage == 0 }

    /// Whether the gate waits for a disk clear to open; read it holding a key stripe's lock.
    var opensWhenCleared: Bool { opensWhenClearedStorage }

    /// Whether a disk clear is under way; read it holding a key stripe's lock.
    var isClearingDisk: Bool { diskClearsStorage > 0 }

    /// Whether the gate opens once the disk clears under way are done (it was asked to open while
    /// one was under way).
    private var opensWhenClearedStorage = false

    /// Opens or closes the gate; call it holding every key stripe's lock.
    ///
    /// While a disk clear is under way the gate opens only once it is done: a value stored before
    /// would be removed by it, a confirmed save included.
    func setOpen(_ isOpen: Bool) {
        if isOpen, diskClearsStorage > 0 {
            opensWhenClearedStorage = true
            return
        }
        opensWhenClearedStorage = false
        isOpenStorage = isOpen
    }

    /// Counts a disk clear begun (`1`) or finished (`-1`), opening the gate when it was asked to
    /// open meanwhile; call it holding every key stripe's lock.
    func countDiskClear(_ change: Int) {
        diskClearsStorage += change
        if diskClearsStorage == 0, opensWhenClearedStorage {
            opensWhenClearedStorage = false
            isOpenStorage = true
        }
    }

    /// `expiresAt`, or the maximum local age from `now` when that is sooner.
    func localExpiry(_ expiresAt: Expiry, now: Double) -> Expiry {
        let limit = now + maxLocalAge
        return expiresAt.deadline <= limit ? expiresAt : .at(limit)
    }
}

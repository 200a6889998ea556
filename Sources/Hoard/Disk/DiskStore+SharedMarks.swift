import Foundation

extension DiskStore {
    /// How long a mark of a queued shared-level change holds: long enough for a queued write to be
    /// made (each is bounded by the level's command timeout), short enough that a process killed with
    /// its change queued does not keep the others from the shared level for long.
    static let sharedChangeHorizon: TimeInterval = 30
    /// The most marks journaled again one by one after a snapshot (fewer when their bytes would take
    /// more than a quarter of the journal a byte limit allows).
    static let carriedMarkLimit = 64

    /// Notes that a cache on this store is about to queue a change of `key` (of every key when `nil`)
    /// on its shared level, whose removal from the container (or clear) it queues or makes next: the
    /// section that journals that removal journals this mark first, so that no process learns of
    /// the removal without learning that the shared level may still hold the value it removed.
    func noteSharedChangePending(of key: String?) {
        let until = Date().timeIntervalSince1970 + Self.sharedChangeHorizon
        withState { $0.sharedMarksToJournal[key] = max($0.sharedMarksToJournal[key] ?? -.infinity, until) }
    }

    /// Whether another process said that its change of `key` on the shared level (or its clear of
    /// it) may not have been made yet: the shared level may hold the value that change replaces, and
    /// a read of it must not be filled into this container.
    func isSharedChangePending(of key: String) -> Bool {
        let now = Date().timeIntervalSince1970
        return withState { state in
            if state.peerSharedClearUntil > now { return true }
            guard let until = state.peerSharedMarks[key] else { return false }
            if until > now { return true }
            state.peerSharedMarks[key] = nil
            return false
        }
    }

    /// A mark of a change of `key` on the shared level queued now, noted among this store's own (for
    /// the next snapshot to carry); called inside a section, for the caller to journal.
    func sharedMark(of key: String) -> DiskJournal.Record {
        let until = Date().timeIntervalSince1970 + Self.sharedChangeHorizon
        withState { $0.ownSharedMarks[key] = max($0.ownSharedMarks[key] ?? -.infinity, until) }
        return .sharedPending(key: key, until: until)
    }

    /// Journals the marks noted since the last section; called inside a section, once caught up,
    /// before anything else is journaled.
    func journalSharedMarks(log: inout DeferredLog) {
        let marks = withState { state -> [String?: Double] in
            defer { state.sharedMarksToJournal.removeAll() }
            for (key, until) in state.sharedMarksToJournal {
                state.ownSharedMarks[key] = max(state.ownSharedMarks[key] ?? -.infinity, until)
            }
            return state.sharedMarksToJournal
        }
        journal(marks.map { .sharedPending(key: $0.key, until: $0.value) }, log: &log)
    }

    /// Journals again, after a new snapshot, every mark whose deadline has not passed (this store's
    /// and those it learned of), and drops the others; called inside a section.
    func journalLiveSharedMarks(log: inout DeferredLog) {
        let now = Date().timeIntervalSince1970
        let records = withState { state -> [DiskJournal.Record] in
            state.ownSharedMarks = state.ownSharedMarks.filter { $0.value > now }
            state.peerSharedMarks = state.peerSharedMarks.filter { $0.value > now }
            var records: [DiskJournal.Record] = []
            for (key, until) in state.ownSharedMarks { records.append(.sharedPending(key: key, until: until)) }
            for (key, until) in state.peerSharedMarks { records.append(.sharedPending(key: key, until: until)) }
            if state.peerSharedClearUntil > now {
                records.append(.sharedPending(key: nil, until: state.peerSharedClearUntil))
            }
            // Many marks (a burst of removals), or more bytes of them than a quarter of the journal
            // the byte limit allows, are carried as one of every key, with the latest deadline: the
            // new journal stays short (within the byte limit), and no read misses a mark.
            var isTooLarge = records.count > Self.carriedMarkLimit
            if !isTooLarge, let byteLimit = state.options.byteLimit, state.options.limitsOwnFiles {
                isTooLarge =
                    DiskJournal.encode([.begin] + records + [.commit]).count
                    > State.journalAllowance(for: byteLimit) / 4
            }
            if isTooLarge, records.count > 1 {
                let until = records.reduce(-Double.infinity) { latest, record in
                    guard case .sharedPending(_, let until) = record else { return latest }
                    return max(latest, until)
                }
                // One step later than the latest: the folded mark holds other processes' marks, and
                // must not read as the mark of the process that journaled the latest (which ignores its own).
                records = [.sharedPending(key: nil, until: until.nextUp)]
            }
            return records
        }
        guard !records.isEmpty else { return }
        journal(records, log: &log)
        withJournalCursor { container.commit(&$0, log: &log) }
    }
}

extension DiskStore.State {
    /// Drops the marks whose deadline has passed, once there are twice as many as were left the last
    /// time (at least 64).
    ///
    /// A process that writes no snapshot (which drops them too) would otherwise keep every key
    /// removed on the container for ever. Amortized O(1) per mark.
    mutating func dropPassedSharedMarks(now: Double) {
        guard peerSharedMarks.count + ownSharedMarks.count >= sharedMarksDroppedAt else { return }
        peerSharedMarks = peerSharedMarks.filter { $0.value > now }
        ownSharedMarks = ownSharedMarks.filter { $0.value > now }
        sharedMarksDroppedAt = max(DiskStore.carriedMarkLimit, 2 * (peerSharedMarks.count + ownSharedMarks.count))
    }
}

extension SharedContainer {
    /// A change that another process (or another store of this process) made to the container, as
    /// catching up found it: the store applies it to its index.
    enum Change: Sendable {
        /// The store opened an index file (another process replaced the one it had read, or it had
        /// none): the file's snapshot replaces the store's index; the changes after it apply on top.
        case load(DiskEntryIndex)
        /// An entry file was written (or replaced) with another process's value, which may be served.
        case put(SHA256Digest, DiskEntryInfo, key: String)
        /// The entry file of a digest is gone; `key` is the key it held, when the remover knew it.
        case remove(SHA256Digest, key: String?)
        /// Every entry file is gone.
        case clear
        /// Another process queued a change of the key (of every key when `nil`) on the shared level,
        /// which may not be made until the deadline (seconds since 1970).
        case sharedPending(key: String?, until: Double)

        /// The change a journal record describes; `nil` for the records that only mark sections.
        init?(_ record: DiskJournal.Record) {
            switch record {
            case .put(let digest, let size, let expiresAt, let key):
                self = .put(digest, DiskEntryInfo(size: size, expiresAt: expiresAt), key: key)
            case .remove(let digest, let key):
                self = .remove(digest, key: key)
            case .clear:
                self = .clear
            case .sharedPending(let key, let until):
                self = .sharedPending(key: key, until: until)
            case .begin, .commit:
                return nil
            }
        }
    }

    /// What the store knows of the entries that a section left uncommitted names: catching up
    /// checks them against the files, and keeps the store's expiry when the section journaled none.
    ///
    /// Called inside the section, holding the store's `ioLock`; each call may take the state lock.
    struct EntryLookup {
        /// The expiry the store's index holds for an entry, as it was before this catch-up.
        var indexedExpiry: (SHA256Digest) -> Expiry?
        /// The key and the expiry stored in an entry file, or `nil` when they cannot be read.
        var storedHeader: (SHA256Digest) -> (key: String, expiresAt: Expiry)?
    }

    /// What catching up found: the changes for the store to apply, in order, and what then.
    struct CatchUp {
        /// How a catch-up ended, once its changes are applied.
        enum Ending {
            /// The store's index is the container's.
            case current
            /// The index file cannot be trusted, and the cursor has let go of it: the store rebuilds
            /// its index from the entry files, and writes it as a new snapshot.
            case rebuild
            /// The index file cannot be looked at: the store keeps its index, which may miss other
            /// processes' changes.
            case failed(CacheError.FileError)
        }

        /// The changes, oldest first.
        private(set) var changes: [Change] = []
        /// Whether a section that a killed process left uncommitted was resolved against the files:
        /// its new entries may have gone past the limits before it journaled its evictions.
        var resolvedUncommitted = false
        var ending = Ending.current

        /// The index as ``changes`` leave it, where it differs from the store's: what an
        /// uncommitted section read later in the same catch-up is checked against.
        private var loaded: DiskEntryIndex?
        private var isCleared = false
        private var expiries: [SHA256Digest: Expiry?] = [:]

        /// Adds a change after the others.
        mutating func append(_ change: Change) {
            changes.append(change)
            switch change {
            case .load(let index):
                loaded = index
                isCleared = false
                expiries = [:]
            case .put(let digest, let info, _):
                expiries[digest] = info.expiresAt
            case .remove(let digest, _):
                expiries[digest] = .some(nil)
            case .clear:
                isCleared = true
                expiries = [:]
            case .sharedPending:
                break
            }
        }

        /// The expiry of the entry of `digest` in the store's index once ``changes`` are applied;
        /// `nil` when it holds none.
        func indexedExpiry(of digest: SHA256Digest, lookup: EntryLookup) -> Expiry? {
            if let known = expiries[digest] { return known }
            if isCleared { return nil }
            if let loaded { return loaded.peek(digest)?.expiresAt }
            return lookup.indexedExpiry(digest)
        }

        /// Hands the changes over, keeping none: a snapshot's index then has one owner, the store's
        /// state, which changes it in place instead of copying it.
        mutating func takeChanges() -> [Change] {
            loaded = nil
            expiries = [:]
            defer { changes = [] }
            return changes
        }
    }
}

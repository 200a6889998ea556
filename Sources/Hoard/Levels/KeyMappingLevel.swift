/// A level whose keys stand for the keys of a level below it, where two of its keys may stand for one.
///
/// `transformKeys(_:)` and ``Cache/Keyed`` make such levels: through
/// `transformKeys { $0.lowercased() }`, `"Foo"` and `"foo"` are one key of the level below. The
/// adapters that tell keys apart (a batch set keeps the last value of each key, ``pooled()`` shares
/// the gets of one key and parts them at a write of it) ask ``CacheLevel/keyMapping``, so that the
/// keys the mapping makes one are one for them too, as `==` could not tell. Package-wide only.
package protocol KeyMappingLevel<Key, Value>: CacheLevel {
    /// What a key is stored under below: two keys with equal answers are one key. `nil` for a level
    /// that does not map its keys after all (a ``BasicCache`` that wraps none); the function answers
    /// `nil` when the key below is not `Hashable`, so that nobody can tell.
    var mappedKeyIdentity: (@Sendable (Key) async throws -> StoredKey?)? { get }
}

extension CacheLevel {
    /// What each key is stored under, when this level maps its keys onto those of a level below
    /// (see ``KeyMappingLevel``); `nil` when its keys are its own, and `==` tells them apart.
    @usableFromInline
    package var keyMapping: (@Sendable (Key) async throws -> StoredKey?)? {
        (self as? any KeyMappingLevel<Key, Value>)?.mappedKeyIdentity
    }

    /// What `key` is stored under, for telling which keys are one: the key below it for a level that
    /// maps its keys, otherwise the key itself; `nil` when that key is not `Hashable`.
    ///
    /// - Throws: What mapping the key throws.
    package func storedKey(of key: Key) async throws -> StoredKey? {
        guard let keyMapping else { return StoredKey(key) }
        return try await keyMapping(key)
    }

    /// What each key is stored under in a composite of this level and `other`, when either maps keys.
    ///
    /// For ``compose(_:)``, ``switchLevels(_:_:switchClosure:)`` and the others: the key below in
    /// each, joined (see ``StoredKey/init(joining:_:)``), a level that maps none standing for its own
    /// keys. `nil` when neither maps its keys: `==` tells them apart, as before.
    ///
    /// Two keys are one key of the composite when they are one in both levels; a batch set or a
    /// pooled write must still treat as related two keys that are one in either (see
    /// ``StoredKey/overlaps(_:)``).
    @usableFromInline
    package func jointKeyMapping<Other: CacheLevel>(
        with other: Other
    ) -> (@Sendable (Key) async throws -> StoredKey?)? where Other.Key == Key {
        let mine = keyMapping
        let others = other.keyMapping
        guard mine != nil || others != nil else { return nil }
        return { key in
            let first = if let mine { try await mine(key) } else { StoredKey(key) }
            let second = if let others { try await others(key) } else { StoredKey(key) }
            guard let first, let second else { return nil }
            return StoredKey(joining: first, second)
        }
    }
}

/// What a key is stored under, as one `Hashable` value whatever the key's type: the key of the level
/// that stores it (see ``KeyMappingLevel``).
@usableFromInline package struct StoredKey: Hashable, @unchecked Sendable {
    // Safe because it is only made from keys of levels, which are `Sendable` (see `init`), and never
    // changes.
    private let key: AnyHashable
    /// For the key of a composite whose levels map keys (see ``init(joining:_:)``): the key below
    /// in each level, in order; empty for the key of one level.
    private let parts: [AnyHashable]

    /// The stored key `key`; `nil` when it is not `Hashable`, so that nobody can tell its repeats.
    ///
    /// - Parameter key: A key of the level that stores it.
    package init?(_ key: some Sendable) {
        guard let hashable = key as? AnyHashable else { return nil }
        self.key = hashable
        parts = []
    }

    /// A key that is no other: one a level could not map, told apart by its position in a batch.
    ///
    /// - Parameter position: The key's position in its batch.
    package init(unmappedAt position: Int) {
        key = AnyHashable(UnmappedKey(position: position))
        parts = []
    }

    /// The key of a composite of two levels: what the key is stored under in each (itself joined
    /// keys, for a composite of composites).
    ///
    /// Two joined keys are equal when they are one key in every level: only then is a get of one a
    /// get of the other. They ``overlaps(_:)`` when they are one key in some level: then a write of
    /// one changes what a get of the other reads.
    ///
    /// - Parameters:
    ///   - first: What the key is stored under in the first level.
    ///   - second: What it is stored under in the second.
    package init(joining first: StoredKey, _ second: StoredKey) {
        parts = first.levelKeys + second.levelKeys
        key = AnyHashable(parts)
    }

    /// What the key is stored under in each level, in order.
    private var levelKeys: [AnyHashable] { parts.isEmpty ? [key] : parts }

    /// Whether the key is equal to itself in every level: not so for `Double.nan` (or a key whose
    /// `==` is not reflexive), whose repeats no table can find, so that nothing can tell which other
    /// keys it is one with.
    package var isReflexive: Bool { levelKeys.allSatisfy { $0 == $0 } }

    /// Whether the key is a composite's, joined from the keys of several levels.
    package var isJoined: Bool { !parts.isEmpty }

    /// Whether the two keys are one key in some level: a write of one changes what the other reads.
    ///
    /// The same as `==` for keys of one level.
    ///
    /// - Parameter other: A key of the same level or composite.
    /// - Returns: Whether they are one key in at least one level.
    package func overlaps(_ other: StoredKey) -> Bool {
        guard isJoined, other.isJoined, parts.count == other.parts.count else { return self == other }
        return zip(parts, other.parts).contains { $0 == $1 }
    }

    /// The keys below of each level, for a table of which keys overlap (see ``overlaps(_:)``): each
    /// with its level's position.
    package var levelKeysByLevel: [LevelKey] {
        levelKeys.enumerated().map { LevelKey(level: $0.offset, key: $0.element) }
    }

    /// What a key is stored under in one level of a composite.
    package struct LevelKey: Hashable {
        let level: Int
        let key: AnyHashable
    }
}

/// A key of a batch that its level could not map, which is no other key.
private struct UnmappedKey: Hashable {
    let position: Int
}

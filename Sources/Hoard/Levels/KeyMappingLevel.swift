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
}

/// What a key is stored under, as one `Hashable` value whatever the key's type: the key of the level
/// that stores it (see ``KeyMappingLevel``).
@usableFromInline package struct StoredKey: Hashable, @unchecked Sendable {
    // Safe because it is only made from keys of levels, which are `Sendable` (see `init`), and never
    // changes.
    private let key: AnyHashable

    /// The stored key `key`; `nil` when it is not `Hashable`, so that nobody can tell its repeats.
    ///
    /// - Parameter key: A key of the level that stores it.
    package init?(_ key: some Sendable) {
        guard let hashable = key as? AnyHashable else { return nil }
        self.key = hashable
    }

    /// A key that is no other: one a level could not map, told apart by its position in a batch.
    ///
    /// - Parameter position: The key's position in its batch.
    package init(unmappedAt position: Int) {
        key = AnyHashable(UnmappedKey(position: position))
    }
}

/// A key of a batch that its level could not map, which is no other key.
private struct UnmappedKey: Hashable {
    let position: Int
}

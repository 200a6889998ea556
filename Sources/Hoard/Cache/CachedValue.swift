import Foundation

/// A value stored in a cache's memory level, with its expiry date.
@usableFromInline
struct CachedValue<Value: Sendable>: Sendable {
    @usableFromInline var value: Value
    /// When the value stops being live.
    @usableFromInline var expiresAt: Expiry

    @inlinable
    init(_ value: Value, expiresAt: Expiry) {
        self.value = value
        self.expiresAt = expiresAt
    }

    /// Whether the value is expired at `now` (seconds since 1970); calls `now` only when the value has
    /// an expiry date.
    @inlinable
    func isExpired(at now: () -> Double) -> Bool {
        expiresAt.isExpired(now: now)
    }
}

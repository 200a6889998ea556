import Foundation

/// How long a cached value stays fresh.
///
/// Give a default to the builder with ``CacheBuilder/expiry(_:)`` and override it per entry with
/// ``Cache/set(_:forKey:expiry:)``:
/// ```swift
/// let feed = try CacheBuilder<Feed>().containerName("feed").expiry(.seconds(300)).build()
/// feed.set(home, forKey: "home", expiry: .seconds(30))
/// ```
/// An entry is live while "now" (from ``CacheBuilder/clock(_:)``) is before its expiry date, and
/// expired from that instant on: `.seconds(0)` stores a value that is already expired. The date is
/// stored with the entry, in memory and on disk, so it survives a restart.
///
/// A struct with static members rather than an enum, so that a minor release can add a kind of expiry
/// without breaking a client's `switch`; call sites read as they would with an enum.
public struct CacheExpiry: Sendable, Hashable {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case never
        case seconds(TimeInterval)
        case date(Date)
    }

    @usableFromInline let kind: Kind

    @inlinable
    init(_ kind: Kind) { self.kind = kind }

    /// The entry never expires (the default).
    @inlinable public static var never: CacheExpiry { CacheExpiry(.never) }

    /// The entry expires this many seconds after it is stored.
    ///
    /// Infinity means never; a negative number or NaN stores an entry that is already expired.
    @inlinable
    public static func seconds(_ seconds: TimeInterval) -> CacheExpiry { CacheExpiry(.seconds(seconds)) }

    /// The entry expires at this date.
    @inlinable
    public static func date(_ date: Date) -> CacheExpiry { CacheExpiry(.date(date)) }
}

extension CacheExpiry {
    /// The expiry of an entry stored at `now`.
    @inlinable
    func expiry(storedAt now: @autoclosure () -> Date) -> Expiry {
        switch kind {
        case .never:
            return .never
        case .seconds(let seconds):
            if seconds.isNaN { return .at(-Double.infinity) }
            if seconds == .infinity { return .never }
            return .at(now().timeIntervalSince1970 + seconds)
        case .date(let date):
            return .at(date.timeIntervalSince1970)
        }
    }
}

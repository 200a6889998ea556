import Foundation

/// When a stored value stops being live: never, or at a deadline.
///
/// The one form of an expiry date inside the library, in memory, in pending writes, in the disk
/// index and in entry files. The public ``CacheExpiry`` says how long a value should live; this says
/// until when it does, once it is stored. A value is live strictly before its deadline and expired
/// from that instant on.
///
/// Eight bytes: the deadline in seconds since 1970, with "never" kept as +infinity so that every
/// comparison is one floating-point compare. Only this type knows that; use ``never``,
/// ``at(_:)`` and the accessors below.
@usableFromInline
struct Expiry: Sendable, Hashable {
    /// Seconds since 1970; +infinity for never, never NaN.
    @usableFromInline let deadline: Double

    @inlinable
    init(uncheckedDeadline deadline: Double) {
        self.deadline = deadline
    }

    /// A value that never expires.
    @inlinable
    static var never: Expiry { Expiry(uncheckedDeadline: .infinity) }

    /// A value that expires at `secondsSince1970`; NaN counts as already expired, +infinity as never.
    @inlinable
    static func at(_ secondsSince1970: Double) -> Expiry {
        Expiry(uncheckedDeadline: secondsSince1970.isNaN ? -.infinity : secondsSince1970)
    }

    /// A value that expires at `date`.
    static func at(_ date: Date) -> Expiry { .at(date.timeIntervalSince1970) }

    /// Whether the value never expires.
    @inlinable
    var isNever: Bool { deadline == .infinity }

    /// The deadline as a date; `nil` for never.
    var date: Date? { isNever ? nil : Date(timeIntervalSince1970: deadline) }

    /// The deadline in seconds since 1970; `nil` for never (the form entry files store).
    var secondsSince1970: Double? { isNever ? nil : deadline }

    /// Reads the form entry files store: `nil` for never.
    init(secondsSince1970 seconds: Double?) {
        self = seconds.map(Expiry.at) ?? .never
    }

    /// Whether the value is expired at `now` (seconds since 1970).
    @inlinable
    func isExpired(at now: Double) -> Bool { deadline <= now }

    /// Whether the value is expired now; asks `now` (seconds since 1970) only when there is a
    /// deadline, so that a value that never expires costs no clock read.
    @inlinable
    func isExpired(now: () -> Double) -> Bool { !isNever && now() >= deadline }
}

import Foundation

/// How a cache with a shared level keeps its own memory and disk copies in step with what the other
/// instances of a fleet write: see ``CacheBuilder/coherence(_:)``.
///
/// ```swift
/// let users = try CacheBuilder<User>()
///     .containerName("users")
///     .sharedLevel(shared)
///     .coherence(.invalidations)          // others' writes evict the local copies within milliseconds
///     .build()
/// ```
public struct CacheCoherence: Sendable, Equatable {
    /// What a cache that tracks invalidations does while it cannot (the tracking connection is lost
    /// or the server is down): see ``CacheCoherence/invalidations(maxLocalAge:duringOutage:)``.
    ///
    /// A struct with static values rather than an enum: later releases may add values, so a
    /// `switch` over it needs a `default`.
    public struct Outage: Sendable, Hashable, CustomStringConvertible {
        /// The name, as in `CacheCoherence.Outage.serveLocalCopies`.
        public let description: String

        private init(_ description: String) { self.description = description }

        /// The local copies keep serving, each at most the maximum local age old: the default.
        ///
        /// Values read or fetched meanwhile are kept; once tracking is back they are all dropped,
        /// since a change may have gone unannounced. Protects the shared level and the origin.
        public static let serveLocalCopies = Outage("serveLocalCopies")
        /// Every local copy is dropped at once, and memory and disk are bypassed until tracking is back.
        ///
        /// Every read goes to the shared level, or to the fetcher when that is down too. No read is
        /// staler than the loss takes to detect, at the cost of the origin's load.
        public static let bypassLocalCopies = Outage("bypassLocalCopies")
    }

    /// Whether the cache subscribes to the shared level's invalidations.
    public let tracksInvalidations: Bool
    /// The longest a value stays in the local levels (memory and disk) after it was stored there,
    /// whatever its own expiry: the bound on staleness when every other mechanism fails.
    public let maxLocalAge: Duration
    /// What the cache does while tracking is lost (``Outage/serveLocalCopies`` unless chosen).
    public let duringOutage: Outage

    /// Subscribes to the shared level's invalidations, with local copies kept at most a minute,
    /// served during an outage.
    ///
    /// The shared level must be able to announce changes (as `RedisCacheLevel` does) and track, or
    /// ``CacheBuilder/build()`` throws.
    public static var invalidations: CacheCoherence { .invalidations(maxLocalAge: .seconds(60)) }

    /// Subscribes to the shared level's invalidations, with local copies kept at most `maxLocalAge`.
    ///
    /// ```swift
    /// .coherence(.invalidations(maxLocalAge: .seconds(30), duringOutage: .bypassLocalCopies))
    /// ```
    ///
    /// - Parameters:
    ///   - maxLocalAge: The longest a value stays in memory or on disk (more than zero).
    ///   - duringOutage: What the local copies do while tracking is lost.
    /// - Returns: The coherence.
    public static func invalidations(
        maxLocalAge: Duration,
        duringOutage: Outage = .serveLocalCopies
    ) -> CacheCoherence {
        CacheCoherence(tracksInvalidations: true, maxLocalAge: maxLocalAge, duringOutage: duringOutage)
    }

    /// No invalidations: local copies are kept at most `maxAge`.
    ///
    /// Another instance's write is then seen within that time. For shared levels or servers that
    /// cannot track.
    ///
    /// - Parameter maxAge: The longest a value stays in memory or on disk (more than zero).
    /// - Returns: The coherence.
    public static func ttlOnly(maxAge: Duration) -> CacheCoherence {
        CacheCoherence(tracksInvalidations: false, maxLocalAge: maxAge, duringOutage: .serveLocalCopies)
    }

    /// ``maxLocalAge`` in seconds.
    var maxLocalSeconds: Double {
        let (seconds, attoseconds) = maxLocalAge.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

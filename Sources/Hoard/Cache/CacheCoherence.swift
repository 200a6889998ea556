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
    /// Whether the cache subscribes to the shared level's invalidations.
    public let tracksInvalidations: Bool
    /// The longest a value stays in the local levels (memory and disk) after it was stored there,
    /// whatever its own expiry: the bound on staleness when every other mechanism fails.
    public let maxLocalAge: Duration

    /// Subscribes to the shared level's invalidations, with local copies kept at most a minute.
    ///
    /// The shared level must adopt ``InvalidatingCacheLevel`` and be able to track, or
    /// ``CacheBuilder/build()`` throws.
    public static var invalidations: CacheCoherence { .invalidations(maxLocalAge: .seconds(60)) }

    /// Subscribes to the shared level's invalidations, with local copies kept at most `maxLocalAge`.
    ///
    /// - Parameter maxLocalAge: The longest a value stays in memory or on disk (more than zero).
    /// - Returns: The coherence.
    public static func invalidations(maxLocalAge: Duration) -> CacheCoherence {
        CacheCoherence(tracksInvalidations: true, maxLocalAge: maxLocalAge)
    }

    /// No invalidations: local copies are kept at most `maxAge`.
    ///
    /// Another instance's write is then seen within that time. For shared levels or servers that
    /// cannot track.
    ///
    /// - Parameter maxAge: The longest a value stays in memory or on disk (more than zero).
    /// - Returns: The coherence.
    public static func ttlOnly(maxAge: Duration) -> CacheCoherence {
        CacheCoherence(tracksInvalidations: false, maxLocalAge: maxAge)
    }

    /// ``maxLocalAge`` in seconds.
    var maxLocalSeconds: Double {
        let (seconds, attoseconds) = maxLocalAge.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

import Foundation
import HoardTestSupport

@testable import Hoard

/// A shared level in memory that can lease keys, for the tests of leases without a server.
///
/// Several caches on one of these are a fleet on one Redis. Lease durations are not kept (a lease
/// lasts until it is used, released or ended by a write).
final class FakeLeasingLevel: LeasingCacheLevel, Sendable {
    private let state = Protected((values: [String: Data](), leases: [String: String](), granted: [String: Int]()))

    /// How many leases were granted for `key`.
    func leasesGranted(forKey key: String) -> Int { state.withLock { $0.granted[key] ?? 0 } }

    /// The token holding the lease of `key`, if any.
    func lease(forKey key: String) -> String? { state.withLock { $0.leases[key] } }

    func get(_ key: String) async throws -> Data {
        guard let value = state.withLock({ $0.values[key] }) else { throw CacheError.notFound(key: key) }
        return value
    }

    func set(_ value: Data, forKey key: String) async throws {
        state.withLock { $0.values[key] = value }
    }

    func removeValue(forKey key: String) async throws {
        state.withLock { $0.values[key] = nil }
    }

    func clear() async {
        state.withLock {
            $0.values = [:]
            $0.leases = [:]
        }
    }

    func onMemoryWarning() {}

    func takeLease(forKey key: String, token: String, duration: Duration) async throws -> Bool {
        state.withLock { state in
            guard state.leases[key] == nil else { return false }
            state.leases[key] = token
            state.granted[key, default: 0] += 1
            return true
        }
    }

    func set(_ value: Data, forKey key: String, expiresAt: Date?, ifLeasedTo token: String) async throws -> Bool {
        state.withLock { state in
            guard state.leases[key] == token else { return false }
            state.leases[key] = nil
            state.values[key] = value
            return true
        }
    }

    func releaseLease(forKey key: String, token: String) async throws {
        state.withLock { state in
            if state.leases[key] == token { state.leases[key] = nil }
        }
    }

    func setEndingLease(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        state.withLock { state in
            state.values[key] = value
            state.leases[key] = nil
        }
    }

    func removeValueEndingLease(forKey key: String) async throws {
        state.withLock { state in
            state.values[key] = nil
            state.leases[key] = nil
        }
    }
}

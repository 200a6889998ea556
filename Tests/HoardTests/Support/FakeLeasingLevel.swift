import Foundation
import HoardTestSupport

@testable import Hoard

/// A shared level in memory that can lease keys, for the tests of leases without a server.
///
/// Several caches on one of these are a fleet on one Redis. Lease durations are not kept (a lease
/// lasts until it is used, released or ended by a write).
final class FakeLeasingLevel: LeasingCacheLevel, Sendable {
    private let state = Protected((values: [String: Data](), leases: [String: String](), granted: [String: Int]()))
    /// Calls that wait for a gate before they are served: a server that stopped answering.
    struct Stall {
        /// What the stalled calls wait for.
        var gate: Gate
        /// Whether reads stall; otherwise lease requests do.
        var reads: Bool
        /// How many lease requests are answered before calls stall.
        var afterLeaseRequests: Int
    }

    /// The stall, if any: set it before the calls it should catch are made.
    let stall = Protected<Stall?>(nil)
    /// How many reads and lease requests met the stall.
    let stalledCalls = Counter()
    /// How many of ``stalledCalls`` were served once the stall ended.
    let stalledCallsServed = Counter()
    /// How many lease requests were answered, granted or not.
    let leaseRequestsAnswered = Counter()

    /// Waits for the stall's gate if a read (`isRead`) or a lease request is to stall now.
    ///
    /// - Returns: Whether the call stalled.
    private func waitOutStall(isRead: Bool) async -> Bool {
        guard let stall = stall.withLock({ $0 }), stall.reads == isRead,
            leaseRequestsAnswered.value >= stall.afterLeaseRequests
        else { return false }
        stalledCalls.increment()
        try? await stall.gate.wait()
        return true
    }

    /// How many leases were granted for `key`.
    func leasesGranted(forKey key: String) -> Int { state.withLock { $0.granted[key] ?? 0 } }

    /// The token holding the lease of `key`, if any.
    func lease(forKey key: String) -> String? { state.withLock { $0.leases[key] } }

    func get(_ key: String) async throws -> Data {
        let stalled = await waitOutStall(isRead: true)
        defer { if stalled { stalledCallsServed.increment() } }
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
        let stalled = await waitOutStall(isRead: false)
        defer {
            leaseRequestsAnswered.increment()
            if stalled { stalledCallsServed.increment() }
        }
        return state.withLock { state in
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

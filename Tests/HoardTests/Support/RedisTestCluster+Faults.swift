import Foundation

@testable import HoardRedis

extension RedisTestCluster {
    // MARK: - Failures

    /// Ends a node with SIGKILL, as a crash would, and waits until its process is gone.
    ///
    /// The cluster leaves it out from then on: commands to it throw, and ``waitUntilSettled(_:)``
    /// asks only the others. For a primary, ``waitForFailover(of:)`` waits until a replica took over.
    func kill(_ node: RedisTestServer) {
        killedPorts.withLock { _ = $0.insert(node.port) }
        let level = levels.withLock { $0.removeValue(forKey: node.port) }
        node.kill()
        // Closes its connection after the lock is released and the node is gone.
        _ = level
    }

    /// Asks a replica to take over from its primary (`CLUSTER FAILOVER`, the safe manual kind: the
    /// primary stops writes until the replica has caught up), and waits until every live node sees
    /// the replica as a primary serving its former primary's slots, and the cluster has settled.
    ///
    /// - Throws: `TestServerError` when `replica` is not a replica, or the failover does not end
    ///   within two minutes.
    func failover(replica: RedisTestServer) async throws {
        let view = try await currentView()
        guard let node = view.node(port: replica.port), let primaryID = node.primaryID,
            let slots = view.node(id: primaryID)?.slots
        else { throw TestServerError("\(replica.port) is not a replica:\n\(view)") }
        _ = try await send(["CLUSTER", "FAILOVER"], to: replica)
        try await waitUntilSettled { view in
            guard let promoted = view.node(id: node.id), promoted.isPrimary, promoted.slots == slots else {
                throw TestServerError("\(replica.port) has not taken over yet:\n\(view)")
            }
        }
    }

    /// Waits until a replica has taken over from a primary ``kill(_:)`` ended: it serves the slots
    /// the dead primary served when the cluster last settled, and the cluster has settled again.
    ///
    /// - Parameter port: The port of the killed primary.
    /// - Returns: The primary that took over, as the cluster describes it.
    /// - Throws: `TestServerError` when the node was not killed through ``kill(_:)`` or was no
    ///   primary serving slots, or when no replica takes over within two minutes.
    @discardableResult
    func waitForFailover(of port: UInt16) async throws -> Node {
        guard killedPorts.withLock({ $0.contains(port) }) else {
            throw TestServerError("\(port) was not killed through RedisTestCluster.kill(_:)")
        }
        guard let slots = lastSettled.withLock({ $0 })?.node(port: port)?.slots, let slot = slots.first?.lowerBound
        else { throw TestServerError("\(port) served no slots when the cluster last settled") }
        return try await waitUntilSettled { view in
            guard let successor = view.owner(ofSlot: slot), successor.port != port, successor.slots == slots else {
                throw TestServerError("no replica has taken over from \(port) yet:\n\(view)")
            }
            return successor
        }
    }

    // MARK: - Moving slots

    /// A slot half-way through a live migration: the source `MIGRATING` it, the destination
    /// `IMPORTING` it, and ``movedKeys`` already on the destination.
    ///
    /// Meanwhile the source answers a command on a key it no longer holds with `-ASK`, and the
    /// destination answers a command on the slot not preceded by `ASKING` with `-MOVED` to the source.
    struct Migration: Sendable {
        let slot: Int
        let source: RedisTestServer
        let destination: RedisTestServer
        let sourceID: String
        let destinationID: String
        /// The keys moved to the destination so far.
        let movedKeys: [[UInt8]]
    }

    /// How many keys one `MIGRATE` moves.
    static let migrationBatch = 100

    /// Moves a slot and its keys from one primary to another, by hand as a live reshard does, and
    /// waits until every live node sees the destination as its owner.
    ///
    /// - Throws: The node's `CacheError` when it refuses a step (the source does not serve the
    ///   slot, say); `TestServerError` when the cluster does not settle within two minutes.
    func migrate(slot: Int, from source: RedisTestServer, to destination: RedisTestServer) async throws {
        try await finishMigration(startMigration(slot: slot, from: source, to: destination, movingKeys: 0))
    }

    /// Starts moving a slot and stops half-way, so that a test can see the redirections of a
    /// migration: marks it `IMPORTING` on the destination, then `MIGRATING` on the source, and
    /// moves `count` of its keys (the first `CLUSTER GETKEYSINSLOT` gives).
    ///
    /// - Parameters:
    ///   - slot: The slot to move.
    ///   - source: The primary that serves it.
    ///   - destination: The primary it goes to.
    ///   - count: How many keys to move; `nil` moves half of them.
    /// - Returns: The migration, for ``finishMigration(_:)``.
    /// - Throws: The node's `CacheError` when it refuses a step (the source does not serve the
    ///   slot, say).
    func startMigration(
        slot: Int,
        from source: RedisTestServer,
        to destination: RedisTestServer,
        movingKeys count: Int? = nil
    ) async throws -> Migration {
        let sourceID = try await id(of: source)
        let destinationID = try await id(of: destination)
        _ = try await send(["CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID], to: destination)
        _ = try await send(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", destinationID], to: source)
        let keyCount = try await integer(["CLUSTER", "COUNTKEYSINSLOT", String(slot)], on: source)
        let moved = try await moveKeys(ofSlot: slot, from: source, to: destination, count: count ?? keyCount / 2)
        return Migration(
            slot: slot,
            source: source,
            destination: destination,
            sourceID: sourceID,
            destinationID: destinationID,
            movedKeys: moved
        )
    }

    /// Moves the rest of a migration's keys, gives the slot to the destination (`CLUSTER SETSLOT
    /// <slot> NODE`, on the destination, then the source, then the other primaries, as the Redis
    /// Cluster specification orders it), and waits until every live node sees the destination as
    /// its owner and the cluster has settled.
    func finishMigration(_ migration: Migration) async throws {
        let slot = migration.slot
        _ = try await moveKeys(ofSlot: slot, from: migration.source, to: migration.destination, count: .max)
        let others = try await primaries.filter {
            $0.port != migration.source.port && $0.port != migration.destination.port
        }
        for node in [migration.destination, migration.source] + (try others.map(server)) {
            _ = try await send(["CLUSTER", "SETSLOT", String(slot), "NODE", migration.destinationID], to: node)
        }
        try await waitUntilSettled { view in
            guard view.owner(ofSlot: slot)?.id == migration.destinationID else {
                throw TestServerError("slot \(slot) is not on \(migration.destination.port) yet:\n\(view)")
            }
        }
    }

    /// Moves up to `count` keys of a slot with `MIGRATE … KEYS`, ``migrationBatch`` at a time; the
    /// keys moved.
    private func moveKeys(
        ofSlot slot: Int,
        from source: RedisTestServer,
        to destination: RedisTestServer,
        count: Int
    ) async throws -> [[UInt8]] {
        var moved: [[UInt8]] = []
        while moved.count < count {
            let batch = min(Self.migrationBatch, count - moved.count)
            let reply = try await send(["CLUSTER", "GETKEYSINSLOT", String(slot), String(batch)], to: source)
            guard case .array(let items) = reply else { throw TestServerError("GETKEYSINSLOT answered \(reply)") }
            let keys = items.compactMap { $0.bytes.map { [UInt8]($0) } }
            if keys.isEmpty { break }
            // The source logs in to the destination as a client would; with `tls-cluster`, over TLS.
            let login = password.map { ["AUTH", $0] } ?? []
            let arguments = (["127.0.0.1", String(destination.port), "", "0", "10000"] + login + ["KEYS"])
                .map { Array($0.utf8) }
            _ = try await send("MIGRATE", arguments + keys, to: source)
            moved += keys
        }
        return moved
    }

    /// Moves `count` slots from one primary to another with `redis-cli --cluster reshard` (slot by
    /// slot, keys in batches, as in production), and waits until the cluster has settled.
    ///
    /// `redis-cli` runs as a child process, off the cooperative pool; to put load on the cluster
    /// while it runs, start it in a child task and await it after:
    ///
    /// ```swift
    /// async let resharding: Void = cluster.reshard(count: 100, from: a, to: b)
    /// // … requests …
    /// try await resharding
    /// ```
    ///
    /// - Throws: `TestServerError` with `redis-cli`'s output when it fails (it refuses a cluster
    ///   that has not settled), or when the cluster does not settle within two minutes.
    func reshard(count: Int, from source: RedisTestServer, to destination: RedisTestServer) async throws {
        let sourceID = try await id(of: source)
        let destinationID = try await id(of: destination)
        try await runCLI([
            "--cluster", "reshard", "127.0.0.1:\(source.port)", "--cluster-from", sourceID, "--cluster-to",
            destinationID, "--cluster-slots", String(count), "--cluster-yes",
        ])
        try await waitUntilSettled { _ in }
    }
}

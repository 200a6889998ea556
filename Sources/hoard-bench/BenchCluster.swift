import Foundation

/// A Redis Cluster of primaries without replicas, started for a scenario and stopped after it.
///
/// Each node is a `redis-server` (a ``BenchServer``) in a folder of its own, with cluster mode on
/// and a bus port chosen here: the default, port + 10 000, may be taken or past 65 535. The slots
/// are split evenly over the primaries with `CLUSTER ADDSLOTSRANGE` (`redis-cli --cluster create`
/// refuses fewer than 3 primaries) and every node meets every other (`CLUSTER MEET`).
///
/// Starting the nodes (``launch(primaries:redisCLI:)``), joining them (``join()``) and waiting for
/// the cluster (``waitUntilOK(within:)``) are apart, so that clusters started and joined together
/// wait together: a new primary says `cluster_state:ok` no sooner than 2 s after it started, and a
/// joined one ``nodeTimeoutMilliseconds`` after it last missed a majority.
final class BenchCluster {
    /// How many hash slots a cluster has.
    static let slotCount = 16_384
    /// `cluster-node-timeout`: 2 s, as in Redis's own `create-cluster` script.
    ///
    /// A primary that was short of a majority turns ok this long after it stops being (clamped to
    /// 0.5 – 5 s): the default, 15 s, would make each cluster wait 5 s. A node is suspected after
    /// this long without an answer.
    static let nodeTimeoutMilliseconds = 2_000

    /// The primaries, in the order of their slots: node i owns the i-th of the even ranges.
    let nodes: [BenchServer]
    /// Each node's cluster bus port, in the order of ``nodes``.
    private let busPorts: [Int]
    /// The folder that holds every node's folder.
    private let folder: URL
    private let redisCLI: URL

    /// The nodes' URLs, `redis://127.0.0.1:<port>`.
    var urls: [String] { nodes.map(\.url) }

    private init(nodes: [BenchServer], busPorts: [Int], folder: URL, redisCLI: URL) {
        self.nodes = nodes
        self.busPorts = busPorts
        self.folder = folder
        self.redisCLI = redisCLI
    }

    /// Starts `primaries` cluster-enabled nodes that know nothing of each other yet.
    ///
    /// - Parameters:
    ///   - primaries: How many primaries.
    ///   - redisCLI: The `redis-cli` that sends the cluster commands.
    /// - Returns: The running nodes; ``join()`` makes them a cluster, ``stop()`` stops them.
    /// - Throws: ``BenchServer/Unavailable`` when a node does not start; every node started is
    ///   stopped then.
    static func launch(primaries: Int, redisCLI: URL) async throws -> BenchCluster {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-cluster-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var nodes: [BenchServer] = []
        var busPorts: [Int] = []
        do {
            for number in 0..<primaries {
                let (node, busPort) = try await startNode(in: folder.appendingPathComponent("node-\(number)"))
                nodes.append(node)
                busPorts.append(busPort)
            }
        } catch {
            for node in nodes { node.stop() }
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        return BenchCluster(nodes: nodes, busPorts: busPorts, folder: folder, redisCLI: redisCLI)
    }

    /// Gives each node its even share of the 16 384 slots and makes every node meet every other.
    ///
    /// - Throws: ``BenchServer/Unavailable`` when a node refuses a command.
    func join() throws {
        for (number, node) in nodes.enumerated() {
            let first = Self.slotCount * number / nodes.count
            let last = Self.slotCount * (number + 1) / nodes.count - 1
            try expectOK(node, ["CLUSTER", "ADDSLOTSRANGE", String(first), String(last)])
        }
        // Every pair meets, rather than waiting for gossip to pass the others on.
        for (number, node) in nodes.enumerated() {
            for (other, busPort) in zip(nodes, busPorts).dropFirst(number + 1) {
                try expectOK(node, ["CLUSTER", "MEET", "127.0.0.1", String(other.port), String(busPort)])
            }
        }
    }

    /// Stops every node and removes their folders.
    func stop() {
        for node in nodes { node.stop() }
        try? FileManager.default.removeItem(at: folder)
    }

    /// The number of keys each node holds (`DBSIZE`), in the order of ``nodes``.
    func keyCounts() throws -> [Int] {
        try nodes.map { Int(try command($0, ["DBSIZE"])) ?? -1 }
    }

    /// A cluster-enabled `redis-server` in `folder`, and its bus port.
    ///
    /// A free port found for the bus is free until something binds it: the node's own port may be
    /// the same one, found just after. A node that does not start is tried again on other ports.
    private static func startNode(in folder: URL) async throws -> (BenchServer, busPort: Int) {
        var attempt = 1
        while true {
            let busPort = try BenchServer.freePort()
            do {
                let node = try await BenchServer.start(
                    own: true,
                    extraArguments: [
                        "--cluster-enabled", "yes", "--cluster-config-file",
                        folder.appendingPathComponent("nodes.conf").path, "--cluster-port", String(busPort),
                        "--cluster-node-timeout", String(nodeTimeoutMilliseconds),
                    ],
                    in: folder
                )
                return (node, busPort)
            } catch {
                guard attempt < 3 else { throw error }
                attempt += 1
            }
        }
    }

    /// Returns once every node says `cluster_state:ok` and knows every primary as one that serves
    /// slots, asking each every 20 ms.
    ///
    /// - Parameter limit: How long the nodes may take to agree.
    /// - Throws: ``BenchServer/Unavailable`` when the cluster is not ok within `limit`.
    func waitUntilOK(within limit: Duration = .seconds(20)) async throws {
        let end = ContinuousClock.now + limit
        let expected = [
            "cluster_state": "ok", "cluster_known_nodes": String(nodes.count), "cluster_size": String(nodes.count),
        ]
        var last = ""
        while true {
            var agree = true
            for node in nodes {
                let info = try Self.fields(command(node, ["CLUSTER", "INFO"]))
                if expected.contains(where: { info[$0.key] != $0.value }) {
                    agree = false
                    let state = expected.keys.sorted().map { "\($0):\(info[$0] ?? "?")" }.joined(separator: " ")
                    last = "node \(node.port) says \(state)"
                    break
                }
            }
            if agree { return }
            guard ContinuousClock.now < end else {
                throw BenchServer.Unavailable(description: "the cluster was not ok within \(limit): \(last)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The `name:value` lines of an `INFO`-style reply.
    private static func fields(_ reply: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in reply.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return fields
    }

    private func expectOK(_ node: BenchServer, _ arguments: [String]) throws {
        let reply = try command(node, arguments)
        guard reply == "OK" else {
            throw BenchServer.Unavailable(
                description: "\(arguments.joined(separator: " ")) on port \(node.port) answered \(reply)"
            )
        }
    }

    /// `redis-cli`'s reply to `arguments` sent to `node`, without the trailing newline.
    private func command(_ node: BenchServer, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = redisCLI
        process.arguments = ["-h", "127.0.0.1", "-p", String(node.port)] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

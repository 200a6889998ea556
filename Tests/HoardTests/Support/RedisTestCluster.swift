import Foundation
import Testing

@testable import Hoard
@testable import HoardRedis

/// A Redis Cluster for the tests: primaries and their replicas, each a ``RedisTestServer`` of its own
/// on 127.0.0.1, joined by `redis-cli --cluster create`; with TLS only and with a password when asked.
///
/// Every operation waits on the condition it causes, never for a set time:
/// ``start(primaries:replicasPerPrimary:tls:password:)`` returns once the cluster has *settled* (see
/// ``waitUntilSettled(_:)``), ``failover(replica:)`` once every live node sees the replica as a
/// primary, ``migrate(slot:from:to:)`` once every live node sees the slot's new owner.
///
/// ```swift
/// let cluster = try await RedisTestCluster.start()
/// let owner = try await cluster.node(forSlot: RedisTestCluster.slot(of: "k"))
/// _ = try await cluster.send(["SET", "k", "v"], to: owner)
/// cluster.kill(owner)
/// let successor = try await cluster.waitForFailover(of: owner.port)
/// ```
///
/// Kill nodes through ``kill(_:)``, not ``RedisTestServer/kill()``: the cluster then leaves them out
/// of what it asks and checks. The nodes end with the cluster (each server's `deinit`).
///
/// Here (two cores) a 3 + 3 cluster starts in about 2.5 s, a replica takes over from a killed
/// primary in about 3 to 4.5 s (the node timeout is ``nodeTimeout``), a `CLUSTER FAILOVER` takes
/// 0.3 to 0.5 s, and migrating a slot of 250 keys by hand well under 0.1 s.
final class RedisTestCluster: Sendable {
    /// Every node started, primaries and replicas alike, in the order `redis-cli` was given them;
    /// killed ones included.
    let nodes: [RedisTestServer]
    /// The certificates of a cluster reached only over TLS (``start(primaries:replicasPerPrimary:tls:password:)``);
    /// `nil` for one reached over plain TCP.
    let certificates: TLSCertificates?
    /// The password every node asks of its clients and of the others (`requirepass`, `masterauth`).
    let password: String?
    /// `redis://127.0.0.1:<port>` for each node, killed ones included: `rediss://` for a TLS cluster,
    /// with `:<password>@` before the host for one with a password.
    var seedURLs: [String] { nodes.map { url(of: $0) } }
    /// The nodes not killed through ``kill(_:)``.
    var liveNodes: [RedisTestServer] {
        let killed = killedPorts.withLock { $0 }
        return nodes.filter { !killed.contains($0.port) }
    }

    /// The ports of the nodes ``kill(_:)`` ended.
    let killedPorts = Locked<Set<UInt16>>([])
    /// A level per live node, for the `send` methods.
    let levels: Locked<[UInt16: RedisCacheLevel]>
    /// The cluster as it stood when it last settled: who served which slot before a kill.
    let lastSettled = Locked<View?>(nil)

    /// How long a node may stay silent before the others count it as failing, in milliseconds:
    /// short, so that a failover takes seconds, and not so short that a loaded machine fails a
    /// healthy node (a full test run under a sanitizer, three clusters at once, starves nodes for
    /// more than a second at times).
    static let nodeTimeout = 2_000

    private init(nodes: [RedisTestServer], certificates: TLSCertificates?, password: String?) throws {
        self.nodes = nodes
        self.certificates = certificates
        self.password = password
        levels = Locked([:])
        let levels = try nodes.map { ($0.port, try nodeLevel($0)) }
        self.levels.withLock { $0 = Dictionary(uniqueKeysWithValues: levels) }
    }

    /// The URL of one node, with the cluster's scheme and login.
    func url(of node: RedisTestServer) -> String {
        let login = password.map { ":\($0)@" } ?? ""
        return "\(certificates == nil ? "redis" : "rediss")://\(login)127.0.0.1:\(node.port)"
    }

    /// A level on one node alone, for the `send` methods: the cluster's TLS and login, one
    /// connection, and the patient timeouts of ``RedisCacheLevel/patient(url:namespace:poolSize:defaultTTL:)``.
    private func nodeLevel(_ node: RedisTestServer) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(url: url(of: node))
        configuration.tls?.certificateAuthorityFile = certificates?.authority
        configuration.poolSize = 1
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return try RedisCacheLevel(configuration, namespace: "cluster")
    }

    deinit {
        // Closes the connections before the nodes end, so that no level goes on reconnecting to them.
        let closing = levels.withLock { levels in
            defer { levels = [:] }
            return levels
        }
        _ = closing
    }

    // MARK: - Starting

    /// Starts `primaries × (1 + replicasPerPrimary)` nodes, makes them a cluster with
    /// `redis-cli --cluster create`, and waits until it has settled with that shape.
    ///
    /// - Parameters:
    ///   - primaries: How many primaries share the 16 384 slots; at least 3, as `redis-cli` asks.
    ///   - replicasPerPrimary: How many replicas each primary has.
    ///   - tls: With certificates, every node listens only on a TLS port (`--port 0`) presenting
    ///     ``TLSCertificates/Server/good``, and the nodes speak TLS to each other too
    ///     (`tls-cluster`, `tls-replication`).
    ///   - password: With one, every node asks it of clients (`requirepass`) and gives it to its
    ///     primary (`masterauth`).
    /// - Returns: The cluster, settled.
    /// - Throws: `TestServerError` when a node does not start, `redis-cli` fails, or the cluster does
    ///   not settle within two minutes (saying what was still missing).
    static func start(
        primaries: Int = 3,
        replicasPerPrimary: Int = 1,
        tls: TLSCertificates? = nil,
        password: String? = nil
    ) async throws -> RedisTestCluster {
        guard primaries >= 3 else { throw TestServerError("redis-cli --cluster create needs 3 primaries or more") }
        let count = primaries * (1 + replicasPerPrimary)
        let cluster = try RedisTestCluster(
            nodes: (0..<count).map { _ in try startNode(tls: tls, password: password) },
            certificates: tls,
            password: password
        )
        try await cluster.runCLI(
            ["--cluster", "create"] + cluster.nodes.map { "127.0.0.1:\($0.port)" }
                + ["--cluster-replicas", String(replicasPerPrimary), "--cluster-yes"]
        )
        try await cluster.waitUntilSettled { view in
            let members = view.nodes.filter { !$0.isFailing }
            let primaryIDs = members.filter(\.isPrimary).map(\.id)
            let replicaCounts = Dictionary(grouping: members.compactMap(\.primaryID)) { $0 }.mapValues(\.count)
            guard members.count == count, primaryIDs.count == primaries,
                primaryIDs.allSatisfy({ replicaCounts[$0, default: 0] == replicasPerPrimary })
            else { throw TestServerError("the cluster has not its shape yet:\n\(view)") }
        }
        return cluster
    }

    /// Starts one node with cluster mode on, outside any cluster (enough for `CLUSTER KEYSLOT`);
    /// TLS only and with a password as for ``start(primaries:replicasPerPrimary:tls:password:)``.
    ///
    /// Its cluster bus port is a free one of its own: the default, the port + 10 000, may be taken or
    /// past 65 535 for a port the system picked.
    static func startNode(tls: TLSCertificates? = nil, password: String? = nil) throws -> RedisTestServer {
        var lines: [String] = []
        if let tls { lines += tls.serverConfiguration() + ["tls-cluster yes", "tls-replication yes"] }
        if let password { lines += ["requirepass \(password)", "masterauth \(password)"] }
        var attempt = 1
        while true {
            let busPort = try LocalHTTPServer.closedPort()
            do {
                return try RedisTestServer.start(
                    configuration: configuration(busPort: busPort) + lines,
                    tls: tls != nil
                )
            } catch let error as TestServerError
                where error.description.contains("Address already in use") && attempt < 5
            {
                // The bus port was taken between the look and the bind: another one is tried.
                attempt += 1
            }
        }
    }

    /// A node's configuration lines.
    private static func configuration(busPort: UInt16) -> [String] {
        [
            "cluster-enabled yes",
            "cluster-port \(busPort)",
            // Relative to the server's `--dir`, its own temporary folder.
            "cluster-config-file nodes.conf",
            "cluster-node-timeout \(nodeTimeout)",
            // A replica may take over however long ago it last heard its primary: with the default
            // factor, one that never finished its first sync could not, and a failover would hang.
            "cluster-replica-validity-factor 0",
            // Replicas stay with their primary, so that the shape a test set up stays as it was.
            "cluster-allow-replica-migration no",
            // A replica's first sync starts at once, not after the default 5 s wait for others.
            "repl-diskless-sync-delay 0",
            // A primary pings its replicas through the replication stream every second, not every
            // 10: `CLUSTER SLOTS` lists a replica only once its replication offset has moved.
            "repl-ping-replica-period 1",
            "appendonly no",
        ]
    }

    // MARK: - Skipping

    /// `redis-cli` next to `redis-server`, else on the PATH.
    static var cliExecutable: URL? {
        if let server = RedisTestServer.executable {
            let candidate = server.deletingLastPathComponent().appendingPathComponent("redis-cli")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin"
        for folder in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent("redis-cli")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    /// Whether cluster tests should run: `redis-server` and `redis-cli` are there, or CI requires them.
    static var isEnabled: Bool {
        (RedisTestServer.executable != nil && cliExecutable != nil) || RedisTestServer.isRequired
    }
    static let unavailableReason: Comment =
        "no Redis Cluster: put redis-server and redis-cli on the PATH (HOARD_REQUIRE_REDIS=1 fails instead)"

    /// Runs `redis-cli` with `arguments`, after the options that reach this cluster's nodes (TLS and
    /// the authority, the password), to its end; its output lines.
    ///
    /// - Throws: `TestServerError` with its output when it fails.
    @discardableResult
    func runCLI(_ arguments: [String]) async throws -> [String] {
        guard let cli = Self.cliExecutable else { throw TestServerError("redis-cli is not on the PATH") }
        var access: [String] = []
        if let certificates { access += ["--tls", "--cacert", certificates.authority] }
        if let password { access += ["-a", password, "--no-auth-warning"] }
        // Spawned as the servers are (`posix_spawn`), not by Foundation's `Process` (see
        // `RedisTestServer.start`).
        let (lines, ending) = try await WorkerProcess.run(access + arguments, executable: cli.path)
        guard ending == .exited(0) else {
            let command = (["redis-cli"] + access + arguments).joined(separator: " ")
            throw TestServerError("\(command) \(ending):\n\(lines.joined(separator: "\n"))")
        }
        return lines
    }

    // MARK: - The cluster as it stands

    /// The live primaries, as the first live node that answers sees them.
    var primaries: [Node] {
        get async throws { try await currentView().nodes.filter { isLive($0) && $0.isPrimary } }
    }

    /// The live replicas, as the first live node that answers sees them.
    var replicas: [Node] {
        get async throws { try await currentView().nodes.filter { isLive($0) && !$0.isPrimary } }
    }

    /// The node that serves `slot` now, as the first live node that answers sees it.
    func node(forSlot slot: Int) async throws -> RedisTestServer {
        let view = try await currentView()
        guard let owner = view.owner(ofSlot: slot) else {
            throw TestServerError("no node serves slot \(slot):\n\(view)")
        }
        return try server(owner)
    }

    /// The server of a node the cluster describes.
    func server(_ node: Node) throws -> RedisTestServer {
        guard let server = nodes.first(where: { $0.port == node.port }) else {
            throw TestServerError("no node of this cluster listens on \(node.port)")
        }
        return server
    }

    /// A node's cluster id (`CLUSTER MYID`).
    func id(of node: RedisTestServer) async throws -> String {
        try await text(["CLUSTER", "MYID"], on: node)
    }

    /// `CLUSTER NODES` from the first live node that answers.
    func currentView() async throws -> View {
        var failure: (any Error)?
        for node in liveNodes {
            do {
                return try View(parsing: try await text(["CLUSTER", "NODES"], on: node))
            } catch {
                failure = failure ?? error
            }
        }
        throw failure ?? TestServerError("every node of the cluster was killed")
    }

    /// Whether a node the cluster describes was not killed and is not seen as failing.
    func isLive(_ node: Node) -> Bool {
        !node.isFailing && !killedPorts.withLock { $0.contains(node.port) }
    }

    // MARK: - Raw commands

    /// Sends a command, name first, to one node, and returns its reply.
    ///
    /// - Throws: The level's `CacheError`: for an error reply, code `serverRefused`, with the
    ///   server's message in its text (see ``Redirection/init(_:)``).
    func send(_ arguments: [String], to node: RedisTestServer) async throws -> RESPValue {
        guard let name = arguments.first else { throw TestServerError("a command needs a name") }
        return try await send(RESPCommand(name, Array(arguments.dropFirst())), to: node)
    }

    /// Sends a command whose arguments are any bytes (keys that are not UTF-8) to one node.
    func send(_ name: String, _ arguments: [[UInt8]], to node: RedisTestServer) async throws -> RESPValue {
        var command = RESPCommand(name, arguments: arguments.count)
        for argument in arguments { command.append(argument) }
        return try await send(command, to: node)
    }

    /// Sends a command to one node, on the one connection the cluster keeps to it.
    func send(_ command: RESPCommand, to node: RedisTestServer) async throws -> RESPValue {
        guard let level = levels.withLock({ $0[node.port] }) else {
            throw TestServerError("the node on \(node.port) was killed")
        }
        return try await level.send(command)
    }

    /// The ranges of `CLUSTER SLOTS` on `node`, sorted by their first slot.
    func slotRanges(on node: RedisTestServer) async throws -> [SlotRange] {
        try SlotRange.ranges(try await send(["CLUSTER", "SLOTS"], to: node))
    }

    /// The text of a reply (`CLUSTER NODES`, `INFO`, a bulk string).
    func text(_ arguments: [String], on node: RedisTestServer) async throws -> String {
        let reply = try await send(arguments, to: node)
        guard let bytes = reply.bytes else { throw TestServerError("\(arguments) answered \(reply)") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The number a command answers (`CLUSTER COUNTKEYSINSLOT`, `WAIT`).
    func integer(_ arguments: [String], on node: RedisTestServer) async throws -> Int {
        let reply = try await send(arguments, to: node)
        guard case .integer(let value) = reply else { throw TestServerError("\(arguments) answered \(reply)") }
        return Int(value)
    }

    /// The `field:value` lines of an `INFO` or `CLUSTER INFO` reply.
    static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("#") else { continue }
            fields[String(line[..<colon])] = String(line[line.index(after: colon)...])
        }
        return fields
    }

    // MARK: - Settling

    /// Waits until the cluster has settled, and `check` passes on its view; returns what `check`
    /// returns.
    ///
    /// Settled means, for the live nodes (those not killed through ``kill(_:)``): each reports
    /// `cluster_state:ok` in `CLUSTER INFO`; in each one's `CLUSTER NODES` every live node is
    /// connected and not failing, the live primaries serve all 16 384 slots, and no slot is being
    /// migrated; each one's `CLUSTER SLOTS` says the same, listing every live replica; all of them
    /// agree on who serves which slots and who replicates whom; and each live replica's link to its
    /// primary is up (`INFO replication`), so that it can take over.
    ///
    /// - Parameter check: Throws (saying what is missing) until the view is the one wanted.
    /// - Returns: What `check` returned on the settled view.
    /// - Throws: The last thing missing, after two minutes.
    @discardableResult
    func waitUntilSettled<T>(_ check: (View) throws -> T) async throws -> T {
        try await eventually {
            let view = try await settledView()
            let result = try check(view)
            lastSettled.withLock { $0 = view }
            return result
        }
    }

    /// The cluster as the first live node sees it, once every live node agrees and the cluster is
    /// whole (see ``waitUntilSettled(_:)``).
    private func settledView() async throws -> View {
        let live = liveNodes
        let livePorts = Set(live.map(\.port))
        var shapes: [(UInt16, View.Shape)] = []
        var first: View?
        for node in live {
            let state = Self.fields(try await text(["CLUSTER", "INFO"], on: node))["cluster_state"]
            guard state == "ok" else { throw TestServerError("\(node.port) says cluster_state:\(state ?? "?")") }
            let view = try View(parsing: try await text(["CLUSTER", "NODES"], on: node))
            shapes.append((node.port, try view.shape(of: livePorts)))
            try view.check(try await slotRanges(on: node), livePorts: livePorts)
            first = first ?? view
        }
        guard let view = first, let (firstPort, shape) = shapes.first else {
            throw TestServerError("every node of the cluster was killed")
        }
        for (port, other) in shapes where other != shape {
            throw TestServerError("\(port) and \(firstPort) disagree:\n\(other)\n\(shape)")
        }
        for replica in view.nodes where livePorts.contains(replica.port) && !replica.isPrimary {
            let link = Self.fields(try await text(["INFO", "replication"], on: try server(replica)))
            let primaryPort = replica.primaryID.flatMap { view.node(id: $0)?.port }
            guard link["master_link_status"] == "up", link["master_port"] == primaryPort.map(String.init) else {
                throw TestServerError("the replica on \(replica.port) is not linked to its primary yet: \(link)")
            }
        }
        return view
    }
}

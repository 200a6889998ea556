import Foundation

@testable import Hoard
@testable import HoardRedis

extension RedisTestCluster {
    /// One node as a `CLUSTER NODES` line describes it.
    struct Node: Sendable, Equatable, CustomStringConvertible {
        /// Its cluster id, 40 hex digits.
        let id: String
        /// Its client port (0 for a node whose address is not known yet).
        let port: UInt16
        /// `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`, `nofailover`.
        let flags: Set<String>
        /// The id of the primary it replicates; `nil` for a primary.
        let primaryID: String?
        /// Whether the describing node's bus link to it is up.
        let isConnected: Bool
        /// The slots it serves, as ranges in ascending order.
        let slots: [ClosedRange<Int>]
        /// Slots it is moving away, to the id of the node they go to (`[slot->-id]`); only on the
        /// describing node's own line.
        let migrating: [Int: String]
        /// Slots it is taking in, to the id of the node they come from (`[slot-<-id]`); only on the
        /// describing node's own line.
        let importing: [Int: String]
        /// The line it was read from.
        let description: String

        var isPrimary: Bool { flags.contains("master") }
        /// Whether it is the node that described the cluster.
        var isMyself: Bool { flags.contains("myself") }
        /// Whether the describing node counts it as failing, or failed.
        var isFailing: Bool { flags.contains("fail") || flags.contains("fail?") }
        /// Whether it is a full, reachable member: known address, handshake done, not failing.
        var isHealthy: Bool {
            !isFailing && !flags.contains("handshake") && !flags.contains("noaddr") && (isConnected || isMyself)
        }
        /// How many slots it serves.
        var slotCount: Int { slots.reduce(0) { $0 + $1.count } }

        /// Whether it serves `slot`.
        func serves(slot: Int) -> Bool { slots.contains { $0.contains(slot) } }

        /// Reads one line: `<id> <ip:port@bus[,hostname]> <flags> <primary> <ping-sent> <pong-received>
        /// <epoch> <link-state> <slot>…`.
        init(parsing line: Substring) throws {
            let fields = line.split(separator: " ")
            guard fields.count >= 8 else { throw TestServerError("not a CLUSTER NODES line: \(line)") }
            let address = fields[1].prefix { $0 != "@" && $0 != "," }
            guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...])
            else { throw TestServerError("no port in CLUSTER NODES line: \(line)") }
            var slots: [ClosedRange<Int>] = []
            var migrating: [Int: String] = [:]
            var importing: [Int: String] = [:]
            for token in fields.dropFirst(8) {
                if token.hasPrefix("[") {
                    // `[slot->-id]` or `[slot-<-id]`.
                    let inner = token.dropFirst().dropLast()
                    if let arrow = inner.range(of: "->-"), let slot = Int(inner[..<arrow.lowerBound]) {
                        migrating[slot] = String(inner[arrow.upperBound...])
                    } else if let arrow = inner.range(of: "-<-"), let slot = Int(inner[..<arrow.lowerBound]) {
                        importing[slot] = String(inner[arrow.upperBound...])
                    } else {
                        throw TestServerError("an unknown slot state \(token) in: \(line)")
                    }
                    continue
                }
                let bounds = token.split(separator: "-").compactMap { Int($0) }
                guard let low = bounds.first, let high = bounds.last, bounds.count <= 2, low <= high else {
                    throw TestServerError("an unknown slot range \(token) in: \(line)")
                }
                slots.append(low...high)
            }
            id = String(fields[0])
            self.port = port
            flags = Set(fields[2].split(separator: ",").map(String.init))
            primaryID = fields[3] == "-" ? nil : String(fields[3])
            isConnected = fields[7] == "connected"
            self.slots = slots.sorted { $0.lowerBound < $1.lowerBound }
            self.migrating = migrating
            self.importing = importing
            description = String(line)
        }
    }

    /// The cluster as one node sees it: its `CLUSTER NODES` reply.
    struct View: Sendable, CustomStringConvertible {
        /// Every node it knows, itself included, failed ones too.
        let nodes: [Node]

        var description: String { nodes.map(\.description).joined(separator: "\n") }

        /// The node that described the cluster.
        var myself: Node? { nodes.first(where: \.isMyself) }

        init(parsing text: String) throws {
            nodes = try text.split(whereSeparator: \.isNewline).map { try Node(parsing: $0) }
            guard nodes.count(where: \.isMyself) == 1 else {
                throw TestServerError("CLUSTER NODES without one line for the node itself:\n\(text)")
            }
        }

        /// The node listening on `port`.
        func node(port: UInt16) -> Node? { nodes.first { $0.port == port } }

        /// The node with the cluster id `id`.
        func node(id: String) -> Node? { nodes.first { $0.id == id } }

        /// The primary that serves `slot`.
        func owner(ofSlot slot: Int) -> Node? { nodes.first { $0.isPrimary && $0.serves(slot: slot) } }

        /// What every node of a settled cluster must agree on: for each live node, whether it is a
        /// primary, the port of its primary, and its slots.
        struct Shape: Equatable, CustomStringConvertible {
            struct Member: Equatable {
                let isPrimary: Bool
                let primaryPort: UInt16?
                let slots: [ClosedRange<Int>]
            }

            let members: [UInt16: Member]

            var description: String {
                members.sorted { $0.key < $1.key }.map { port, member in
                    let role = member.primaryPort.map { "replica of \($0)" } ?? "primary"
                    return "\(port): \(role) \(member.slots)"
                }
                .joined(separator: "\n")
            }
        }

        /// What this view says about the nodes on `livePorts`.
        ///
        /// - Throws: `TestServerError` when one of them is unknown, unreachable or failing in this
        ///   view, when a slot is being migrated, or when the live primaries do not serve all
        ///   16 384 slots.
        func shape(of livePorts: Set<UInt16>) throws -> Shape {
            var members: [UInt16: Shape.Member] = [:]
            for port in livePorts {
                guard let node = node(port: port), node.isHealthy else {
                    throw TestServerError("\(myself?.port ?? 0) does not see \(port) as a healthy member:\n\(self)")
                }
                members[port] = Shape.Member(
                    isPrimary: node.isPrimary,
                    primaryPort: node.primaryID.flatMap { self.node(id: $0)?.port },
                    slots: node.slots
                )
            }
            if let myself, !myself.migrating.isEmpty || !myself.importing.isEmpty {
                throw TestServerError("\(myself.port) is moving slots: \(myself)")
            }
            let served = members.values.filter(\.isPrimary).flatMap(\.slots).reduce(0) { $0 + $1.count }
            guard served == RedisTestCluster.slotCount else {
                throw TestServerError(
                    "the live primaries serve \(served) slots, as \(myself?.port ?? 0) sees it:\n\(self)"
                )
            }
            return Shape(members: members)
        }

        /// Checks that the same node's `CLUSTER SLOTS` covers every slot once, each range with the
        /// primary this view says serves it and all its live replicas.
        ///
        /// - Throws: `TestServerError` saying what differs.
        func check(_ ranges: [SlotRange], livePorts: Set<UInt16>) throws {
            var next = 0
            for range in ranges {
                guard range.slots.lowerBound == next else {
                    throw TestServerError(
                        "CLUSTER SLOTS on \(myself?.port ?? 0) misses or repeats slot \(next): \(ranges)"
                    )
                }
                next = range.slots.upperBound + 1
                guard let owner = owner(ofSlot: range.slots.lowerBound), owner.serves(slot: range.slots.upperBound),
                    range.ports.first == owner.port
                else { throw TestServerError("CLUSTER SLOTS \(range) is not CLUSTER NODES:\n\(self)") }
                let replicas = nodes.filter { $0.primaryID == owner.id && livePorts.contains($0.port) }.map(\.port)
                guard Set(range.ports.dropFirst()) == Set(replicas), range.ports.count == replicas.count + 1 else {
                    throw TestServerError("CLUSTER SLOTS \(range) does not list the replicas \(replicas) yet")
                }
            }
            guard next == RedisTestCluster.slotCount else {
                throw TestServerError("CLUSTER SLOTS on \(myself?.port ?? 0) ends at slot \(next): \(ranges)")
            }
        }
    }

    /// One entry of `CLUSTER SLOTS`: a range of slots and the nodes that serve it, primary first.
    ///
    /// Redis lists a replica there only once it is not failing and has a replication offset, so
    /// that a client reading from replicas finds only those that have caught up.
    struct SlotRange: Sendable, Equatable, CustomStringConvertible {
        let slots: ClosedRange<Int>
        /// The ports of the nodes serving it: the primary, then its replicas.
        let ports: [UInt16]

        var description: String { "\(slots.lowerBound)-\(slots.upperBound) \(ports)" }

        /// Reads the ranges of a `CLUSTER SLOTS` reply, sorted by their first slot.
        static func ranges(_ reply: RESPValue) throws -> [SlotRange] {
            guard case .array(let entries) = reply else { throw TestServerError("CLUSTER SLOTS answered \(reply)") }
            return try entries.map { entry in
                // `[first, last, [ip, port, id, …], …]`.
                guard case .array(let parts) = entry, parts.count >= 3, case .integer(let first) = parts[0],
                    case .integer(let last) = parts[1], first <= last
                else { throw TestServerError("a CLUSTER SLOTS entry \(entry)") }
                let ports = try parts.dropFirst(2).map { node in
                    guard case .array(let fields) = node, fields.count >= 2, case .integer(let port) = fields[1],
                        let port = UInt16(exactly: port)
                    else { throw TestServerError("a CLUSTER SLOTS node \(node)") }
                    return port
                }
                return SlotRange(slots: Int(first)...Int(last), ports: ports)
            }
            .sorted { $0.slots.lowerBound < $1.slots.lowerBound }
        }
    }

    /// A `MOVED` or `ASK` redirection a node answered.
    struct Redirection: Equatable, Sendable, CustomStringConvertible {
        enum Kind: String, Sendable {
            case moved = "MOVED"
            case ask = "ASK"
        }

        let kind: Kind
        let slot: Int
        /// The port of the node it sends the client to.
        let port: UInt16

        var description: String { "\(kind.rawValue) \(slot) 127.0.0.1:\(port)" }

        init(_ kind: Kind, slot: Int, port: UInt16) {
            self.kind = kind
            self.slot = slot
            self.port = port
        }

        /// The redirection an error from a `RedisTestCluster.send` method carries, if
        /// any: read from its text, whatever the level wraps around the server's message.
        init?(_ error: any Error) {
            let text = (error as? CacheError)?.message ?? String(describing: error)
            guard let match = text.firstMatch(of: /(MOVED|ASK) ([0-9]+) 127\.0\.0\.1:([0-9]+)/),
                let kind = Kind(rawValue: String(match.output.1)),
                let slot = Int(match.output.2),
                let port = UInt16(match.output.3)
            else { return nil }
            self.init(kind, slot: slot, port: port)
        }
    }
}

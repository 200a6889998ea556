import Foundation
import Hoard

/// Which primary owns each slot of a Redis Cluster, and the replicas of each, as one node described
/// it (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on a server older than Redis 7).
struct ClusterTopology: Sendable, Equatable {
    typealias Endpoint = RedisCacheLevel.Configuration.Endpoint

    /// A primary and its replicas.
    struct Shard: Sendable, Equatable {
        var primary: Endpoint
        var replicas: [Endpoint]
    }

    /// The shards that own slots.
    private(set) var shards: [Shard] = []
    /// The healthy primaries `CLUSTER SHARDS` named, with slots or not yet (a node just added,
    /// about to receive slots).
    private(set) var unassignedPrimaries: [Endpoint] = []

    /// Every primary: those that own slots, then those that own none yet.
    ///
    /// Tracking and `removeAll` go to all of them: a primary without slots takes keys through `ASK`
    /// while slots move to it.
    var primaries: [Endpoint] {
        let owners = Set(owners.lazy.filter { $0 != Self.unowned }.map { Int($0) })
        let owning = shards.indices.filter(owners.contains).map { shards[$0].primary }
        return owning + unassignedPrimaries.filter { !owning.contains($0) }
    }
    /// For each slot, the index of its shard in ``shards``, or ``unowned``.
    private(set) var owners = [UInt16](repeating: unowned, count: ClusterSlot.count)

    /// A slot no shard owns (the cluster is missing a primary, or was being set up).
    static let unowned = UInt16.max

    /// The shard that owns `slot`, if one does.
    func shard(forSlot slot: Int) -> Shard? {
        let owner = owners[slot]
        return owner == Self.unowned ? nil : shards[Int(owner)]
    }

    /// How many slots have an owner.
    var ownedSlots: Int { owners.lazy.filter { $0 != Self.unowned }.count }

    /// Gives `range` to the shard of `primary`, adding the shard when it is new.
    mutating func assign(_ range: ClosedRange<Int>, to primary: Endpoint, replicas: [Endpoint] = []) {
        let index: Int
        if let found = shards.firstIndex(where: { $0.primary == primary }) {
            index = found
            for replica in replicas where !shards[index].replicas.contains(replica) {
                shards[index].replicas.append(replica)
            }
        } else {
            index = shards.count
            shards.append(Shard(primary: primary, replicas: replicas))
        }
        for slot in range where (0..<ClusterSlot.count).contains(slot) { owners[slot] = UInt16(index) }
    }

    /// The topology a `CLUSTER SHARDS` reply describes.
    ///
    /// - Parameters:
    ///   - reply: The reply.
    ///   - node: The node that answered, whose host stands in for a node that announces none.
    ///   - tls: Whether the level speaks TLS: a node's `tls-port` is used then.
    /// - Returns: `nil` when the reply is not of that form.
    static func fromShards(_ reply: RESPValue, askedNode node: Endpoint, tls: Bool) -> ClusterTopology? {
        guard case .array(let shards) = reply else { return nil }
        var topology = ClusterTopology()
        for shard in shards {
            guard let fields = fields(shard), case .array(let bounds)? = fields["slots"],
                case .array(let nodes)? = fields["nodes"]
            else { return nil }
            var primary: Endpoint?
            var replicas: [Endpoint] = []
            for member in nodes {
                guard let described = Self.fields(member) else { return nil }
                // A failed node, or one still loading its data, serves nothing.
                if let health = described["health"]?.text, health != "online" { continue }
                guard let endpoint = endpoint(described, askedNode: node, tls: tls) else { continue }
                if described["role"]?.text == "master" { primary = endpoint } else { replicas.append(endpoint) }
            }
            guard let primary else { continue }
            if bounds.isEmpty, !topology.unassignedPrimaries.contains(primary) {
                topology.unassignedPrimaries.append(primary)
            }
            var index = 0
            while index + 1 < bounds.count {
                guard case .integer(let start) = bounds[index], case .integer(let end) = bounds[index + 1],
                    start <= end
                else { return nil }
                topology.assign(Int(start)...Int(end), to: primary, replicas: replicas)
                index += 2
            }
        }
        return topology
    }

    /// The topology a `CLUSTER SLOTS` reply describes.
    static func fromSlots(_ reply: RESPValue, askedNode node: Endpoint) -> ClusterTopology? {
        guard case .array(let ranges) = reply else { return nil }
        var topology = ClusterTopology()
        for range in ranges {
            guard case .array(let parts) = range, parts.count >= 3, case .integer(let start) = parts[0],
                case .integer(let end) = parts[1], start <= end
            else { return nil }
            let endpoints = parts[2...].compactMap { part -> Endpoint? in
                guard case .array(let fields) = part, fields.count >= 2, case .integer(let port) = fields[1] else {
                    return nil
                }
                let host = fields[0].text ?? ""
                return Endpoint(host: host.isEmpty || host == "?" ? node.host : host, port: Int(port))
            }
            guard let primary = endpoints.first else { return nil }
            topology.assign(Int(start)...Int(end), to: primary, replicas: Array(endpoints.dropFirst()))
        }
        return topology
    }

    /// The address of a node `CLUSTER SHARDS` describes: its announced endpoint, else its IP, else the
    /// asked node's host; its TLS port with TLS.
    private static func endpoint(_ fields: [String: RESPValue], askedNode node: Endpoint, tls: Bool) -> Endpoint? {
        let port: Int64?
        if tls, case .integer(let tlsPort)? = fields["tls-port"] {
            port = tlsPort
        } else if case .integer(let plain)? = fields["port"] {
            port = plain
        } else {
            port = nil
        }
        guard let port, port > 0 else { return nil }
        let host = [fields["endpoint"]?.text, fields["ip"]?.text].compactMap { $0 }
            .first { !$0.isEmpty && $0 != "?" }
        return Endpoint(host: host ?? node.host, port: Int(port))
    }

    /// The fields of a RESP3 map, or of a RESP2 array of names and values.
    private static func fields(_ value: RESPValue) -> [String: RESPValue]? {
        let elements: [RESPValue]
        switch value {
        case .map(let pairs): elements = pairs
        case .array(let flat) where flat.count.isMultiple(of: 2): elements = flat
        default: return nil
        }
        var fields: [String: RESPValue] = [:]
        var index = 0
        while index + 1 < elements.count {
            guard let name = elements[index].text else { return nil }
            fields[name] = elements[index + 1]
            index += 2
        }
        return fields
    }
}

extension RESPValue {
    /// The UTF-8 text of a bulk or simple string; `nil` for any other kind.
    var text: String? { bytes.map { String(decoding: $0, as: UTF8.self) } }
}

/// Where a `MOVED` or `ASK` reply sends a command: `MOVED <slot> <host>:<port>`.
struct ClusterRedirection: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// The slot belongs to another node now.
        case moved
        /// The slot is moving, and this key is on the node it moves to already: ask it once, after
        /// `ASKING`.
        case ask
    }

    let kind: Kind
    let slot: Int
    let endpoint: ClusterTopology.Endpoint

    /// The redirection an error reply names, if it is one; a missing host (`MOVED 7 :6380`) is the
    /// host of `node`, the node that answered.
    init?(_ message: String, from node: ClusterTopology.Endpoint) {
        let words = message.split(separator: " ")
        guard words.count == 3, let slot = Int(words[1]), (0..<ClusterSlot.count).contains(slot),
            let colon = words[2].lastIndex(of: ":"), let port = Int(words[2][words[2].index(after: colon)...])
        else { return nil }
        switch words[0] {
        case "MOVED": kind = .moved
        case "ASK": kind = .ask
        default: return nil
        }
        var host = String(words[2][..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.slot = slot
        endpoint = ClusterTopology.Endpoint(host: host.isEmpty || host == "?" ? node.host : host, port: port)
    }
}

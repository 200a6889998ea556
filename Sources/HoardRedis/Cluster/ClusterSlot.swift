/// The hash slot of a key in a Redis Cluster: CRC16 (XMODEM) of the key, or of its hash tag, modulo
/// 16 384.
///
/// A key's hash tag is what lies between its first `{` and the first `}` after it, when that is not
/// empty: keys that share a tag share a slot, and so a node, which is what lets one command (a Lua
/// script, an `MGET`) touch them together.
enum ClusterSlot {
    /// How many slots a cluster has.
    static let count = 16_384

    /// The slot of the key whose bytes are `key`.
    static func of(_ key: some Collection<UInt8>) -> Int {
        let slot: Int? = key.withContiguousStorageIfAvailable { of(buffer: $0) }
        return slot ?? Array(key).withUnsafeBufferPointer { of(buffer: $0) }
    }

    private static func of(buffer key: UnsafeBufferPointer<UInt8>) -> Int {
        var hashed = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")),
            let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            hashed = key[(open + 1)..<close]
        }
        return Int(crc16(hashed) & 0x3FFF)
    }

    /// CRC16 as Redis Cluster computes it (XMODEM: polynomial 0x1021, initial value 0, no
    /// reflection); `"123456789"` gives 0x31C3.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    /// A short tag for each slot, made once, on first use: `{tag}` in a key puts it in that slot.
    ///
    /// A lease must live in its value's slot, so that one script can read both; its name carries the
    /// tag of that slot (see `RedisCacheLevel.leaseKey(_:)`).
    static let tags: [String] = {
        var tags = [String?](repeating: nil, count: count)
        var missing = count
        var candidate = 0
        while missing > 0 {
            let tag = String(candidate, radix: 36)
            let slot = Int(crc16(tag.utf8) & 0x3FFF)
            if tags[slot] == nil {
                tags[slot] = tag
                missing -= 1
            }
            candidate += 1
        }
        return tags.map { $0 ?? "" }
    }()
}

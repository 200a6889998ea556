extension RedisTestCluster {
    /// How many hash slots a Redis Cluster has.
    static let slotCount = 16_384

    /// The hash slot of a key, worked out as the Redis Cluster specification says, independently
    /// of the code under test: CRC16 of the key (or of its hash tag) modulo 16 384.
    ///
    /// The hash tag is what lies between the first `{` and the first `}` after it, when that is not
    /// empty; otherwise the whole key is hashed (`{}x`, `x{`, `}{`).
    ///
    /// - Complexity: O(*n*) in the length of the key.
    static func slot(of key: some Collection<UInt8>) -> Int {
        var hashed = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = key.index(after: open)
            if let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen {
                hashed = key[afterOpen..<close]
            }
        }
        return Int(crc16(hashed)) & (slotCount - 1)
    }

    /// The hash slot of a key's UTF-8 bytes.
    static func slot(of key: String) -> Int { slot(of: Array(key.utf8)) }

    /// The hash slot of a key (``slot(of:)-(Collection<UInt8>)``, for a cluster at hand).
    func slot(of key: [UInt8]) -> Int { Self.slot(of: key) }

    /// CRC16-CCITT in its XMODEM form, as Redis Cluster uses it.
    ///
    /// Polynomial 0x1021, initial value 0, no reflection, no final XOR. Of `123456789` it is 0x31C3.
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}

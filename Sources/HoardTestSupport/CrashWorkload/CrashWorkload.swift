/// The crash workload's contract: what `hoard-test-worker crash` writes and reports, and what
/// `CrashTests` checks after killing it.
///
/// The worker runs a random sequence of sets, removals, reads, clears and flushes on the keys
/// `k0 ..< k24`, reporting each as a `Record` before it starts; the test starts it with a `Setup`,
/// kills it, and checks every value left on disk against the records. A value names its key and
/// the sequence number of the set that wrote it, so no two sets write the same value and the
/// checker can tell which set a value on disk came from.
package enum CrashWorkload {
    /// How many keys the workload uses.
    package static let keyCount = 24

    /// Every key the workload uses, in order.
    package static let keys = (0..<keyCount).map(key)

    /// The key numbered `index`: `k0`, `k1` and so on.
    package static func key(_ index: Int) -> String { "k\(index)" }

    /// The value that set number `seq` writes to `key`: `<key>|<seq>|` and `length` filler letters
    /// (`a` to `z`, chosen by `seq`).
    package static func value(key: String, seq: Int, length: Int) -> String {
        let filler = Character(Unicode.Scalar(UInt8(97 + seq % 26)))
        return "\(key)|\(seq)|" + String(repeating: filler, count: length)
    }
}

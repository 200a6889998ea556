#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The contract of the multi-process crash workload: several `hoard-test-worker shared` processes
/// run the crash workload's operations on one container at once, and the test kills some of them.
///
/// Each worker prints the crash workload's records (`CrashWorkload.Record`), each prefixed with the
/// time it was taken on the system-wide monotonic clock, `@<nanoseconds> <record>`: taken before an
/// operation starts for the records that announce one, and after it returned for `D` and `W`. The
/// checker orders operations of different processes by these times. The sequence numbers of worker
/// `w` start at `w * seqStride`, so that no two processes write the same value.
package enum SharedWorkload {
    /// The gap between the sequence numbers of two workers.
    package static let seqStride = 10_000_000

    /// Now on the monotonic clock that every process of the machine shares, in nanoseconds.
    package static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// The line of `record` taken at `time`.
    package static func line(_ record: CrashWorkload.Record, at time: UInt64) -> String {
        "@\(time) \(record.line)"
    }

    /// Reads a line back; `nil` for a line that is not a timestamped record (cut short by a kill).
    package static func parse(_ line: String) -> (time: UInt64, record: CrashWorkload.Record)? {
        guard line.hasPrefix("@"), let space = line.firstIndex(of: " "),
            let time = UInt64(line[line.index(after: line.startIndex)..<space]),
            let record = CrashWorkload.Record(line: String(line[line.index(after: space)...]))
        else { return nil }
        return (time, record)
    }

    /// The worker of a sequence number.
    package static func worker(ofSeq seq: Int) -> Int { seq / seqStride }
}

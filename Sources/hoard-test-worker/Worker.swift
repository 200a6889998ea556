import Foundation
import Hoard
import HoardTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A child process for Hoard's trust tests: it runs a workload or a fault scenario on a container
/// that the test process names, and reports on standard output, one line per record.
///
/// Usage:
/// ```
/// hoard-test-worker crash <folder> <container> <seed> <operations> <maxDiskCount> <maxRamCount> <lfu|lru>
/// hoard-test-worker shared <worker> <crash arguments>  # one of several processes on one container
/// hoard-test-worker hold <folder> <container> [exclusive]  # opens, prints "ready", waits for end of input
/// hoard-test-worker hold-as-earlier-release <folder> <container>  # locks the whole lock file, prints "ready"
/// hoard-test-worker try-open <folder> <container> [exclusive]  # prints "opened <value of key parent>" or "inUse"
/// hoard-test-worker write <folder> <container> <key> <value>|- …  # sets (or removes) each pair, flushes, "flushed"
/// hoard-test-worker clear <folder> <container>  # removeAll(), flushes, prints "cleared"
/// hoard-test-worker open-data <folder> <container>     # opens a Cache<Data>: "opened <n>" or "invalid <why>"
/// hoard-test-worker faults-permissions <folder>        # run as an unprivileged user
/// hoard-test-worker faults-descriptors <folder>
/// hoard-test-worker faults-read-only <folder> <container>  # writes a key, prints the store error
/// hoard-test-worker fleet-get <folder> <container> <redis url> <namespace> <key>…  # see `Fleet`
/// hoard-test-worker fleet-watch <folder> <container> <redis url> <namespace> [<command timeout s> [<tracking ping timeout s>]]  # see `Fleet.watch`
/// hoard-test-worker fleet-lease-bench <folder> <container> <redis url> <namespace> <ms> <callers> <on|on-coherent|off> <n>
/// hoard-test-worker fleet-lease <folder> <container> <redis url> <namespace> <origin folder> <ms> <callers> <key>…
/// hoard-test-worker fleet-lease-holder <folder> <container> <redis url> <namespace> <lease ms> <wait ms> <key>
/// ```
/// Every line is written with one `write(2)` straight to the descriptor, so that what a killed
/// process reported before it died is exactly what the reader receives.
@main
enum Worker {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard let mode = arguments.first else { usage() }
        let rest = Array(arguments.dropFirst())
        do {
            switch mode {
            case "crash": try await CrashWorkload.run(arguments: rest)
            case "shared": try await SharedWorkload.run(arguments: rest)
            case "write": try await TwoProcess.write(arguments: rest)
            case "clear": try await TwoProcess.clear(arguments: rest)
            case "hold": try await TwoProcess.hold(arguments: rest)
            case "hold-as-earlier-release": try TwoProcess.holdAsEarlierRelease(arguments: rest)
            case "try-open": try await TwoProcess.tryOpen(arguments: rest)
            case "open-data": try await TwoProcess.openAsData(arguments: rest)
            case "faults-permissions": try await FaultScenarios(arguments: rest).permissions()
            case "faults-descriptors": try await FaultScenarios(arguments: rest).descriptors()
            case "faults-read-only": try await FaultScenarios(arguments: rest).readOnlyStoreError(rest)
            case "fleet-get": try await Fleet.get(arguments: rest)
            case "fleet-watch": try await Fleet.watch(arguments: rest)
            case "fleet-lease": try await Fleet.lease(arguments: rest)
            case "fleet-lease-bench": try await Fleet.leaseBench(arguments: rest)
            case "fleet-lease-holder": try await Fleet.leaseHolder(arguments: rest)
            default: usage()
            }
        } catch {
            emit("error \(error)")
            exit(2)
        }
    }

    static func usage() -> Never {
        emit(
            "error usage: hoard-test-worker "
                + "crash|shared|write|hold|hold-as-earlier-release|try-open|open-data|faults-permissions|faults-descriptors|faults-read-only|fleet-get|fleet-watch|fleet-lease|fleet-lease-bench|fleet-lease-holder …"
        )
        exit(64)
    }
}

/// Writes one line to standard output with a single system call.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    bytes.withUnsafeMutableBytes { buffer in
        var done = 0
        while done < buffer.count {
            let result = write(1, buffer.baseAddress! + done, buffer.count - done)
            if result > 0 {
                done += result
            } else if result < 0 && errno != EINTR {
                return
            }
        }
    }
}

/// The argument at `index`, or the usage message.
func argument(_ arguments: [String], _ index: Int) -> String {
    guard index < arguments.count else { Worker.usage() }
    return arguments[index]
}

/// A string cache on `container` inside `folder`.
func stringCache(
    folder: String,
    container: String,
    maxRamCount: Int = 100,
    maxDiskCount: Int = 100,
    policy: EvictionPolicy = .lfu,
    maxDiskBytes: Int? = nil,
    exclusive: Bool = false,
    delegate: (any CacheDelegate<String>)? = nil
) throws -> Cache<String> {
    var builder = CacheBuilder<String>(serializer: StringSerializer())
        .containerName(container)
        .directory(URL(fileURLWithPath: folder, isDirectory: true))
        .maxRamCount(maxRamCount)
        .maxDiskCount(maxDiskCount)
        .evictionPolicy(policy)
        .exclusiveProcess(exclusive)
    if let maxDiskBytes { builder = builder.maxDiskBytes(maxDiskBytes) }
    if let delegate { builder = builder.delegate(delegate) }
    return try builder.build()
}

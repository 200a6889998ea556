import Foundation
import Hoard
import HoardRedis

/// Measures the Redis level over its transports, on one server started for the run that listens
/// on a TCP port, a TLS port and a Unix-domain socket.
///
/// `GET` and `SET` of 1 KiB values at 16 and 64 callers (the default pool) over TLS, next to
/// `redis-benchmark --tls` at the same number of connections and to Hoard over plain TCP; then
/// Hoard over the socket next to Hoard over TCP. TLS needs a build with it (on Linux,
/// `--traits TLS`), `openssl` to make the certificates, and `redis-server` built with TLS.
///
/// Scenario `redis-transports`. Targets: Hoard over TLS ≥ 0.7× `redis-benchmark --tls`.
enum RedisTransportBench {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        var report = ScenarioReport(
            name: "redis-transports",
            title: "GET/SET of 1 KiB over TLS, plain TCP and a Unix socket: Hoard and redis-benchmark, one server"
        )
        guard let benchmark = RedisBench.onPath("redis-benchmark"), let openssl = RedisBench.onPath("openssl") else {
            report.notes.append("skipped: redis-benchmark or openssl is not on the PATH")
            return report
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-tls-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificates = try makeCertificates(openssl, in: folder)
        let tlsPort = try BenchServer.freePort()
        let socket = folder.appendingPathComponent("redis.sock").path
        let server: BenchServer
        do {
            server = try await BenchServer.start(
                own: true,
                extraArguments: [
                    "--tls-port", String(tlsPort), "--tls-cert-file", certificates.certificate, "--tls-key-file",
                    certificates.key, "--tls-ca-cert-file", certificates.authority, "--tls-auth-clients", "no",
                    "--unixsocket", socket, "--unixsocketperm", "700",
                ],
                in: folder.appendingPathComponent("server")
            )
        } catch {
            report.notes.append("skipped: no redis-server with TLS (\(error))")
            return report
        }
        defer { server.stop() }
        let requests = context.size(100_000)
        let value = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        let tcp = try RedisCacheLevel(url: server.url, namespace: "hoard-bench")
        let unix = try RedisCacheLevel(RedisCacheLevel.Configuration(socketPath: socket), namespace: "hoard-bench")
        var secure = try RedisCacheLevel.Configuration(url: "rediss://127.0.0.1:\(tlsPort)")
        secure.tls?.certificateAuthorityFile = certificates.authority
        let tls: RedisCacheLevel? =
            RedisCacheLevel.Configuration.TLS.isAvailable
            ? try RedisCacheLevel(secure, namespace: "hoard-bench") : nil
        if tls == nil { report.notes.append("TLS rows skipped: this build has no TLS (on Linux: --traits TLS)") }
        for concurrency in [16, 64] {
            var runs: [(String, RedisCacheLevel)] = [("Hoard TCP", tcp), ("Hoard unix", unix)]
            if let tls { runs.insert(("Hoard TLS", tls), at: 0) }
            let external = try RedisBench.redisBenchmark(
                benchmark,
                server,
                requests: requests,
                clients: concurrency,
                connection: ["-h", "127.0.0.1", "-p", String(tlsPort), "--tls", "--cacert", certificates.authority]
            )
            for command in ["SET", "GET"] {
                var rows: [String: Measurement] = [:]
                for (label, level) in runs {
                    try await level.set(value, forKey: "warm")
                    rows[label] = try await RedisBench.measureLevel(
                        level,
                        command,
                        value,
                        requests: requests,
                        callers: concurrency,
                        label: label
                    )
                }
                let theirs = Measurement(
                    label: "redis-benchmark --tls \(command) -c \(concurrency)",
                    operations: requests,
                    durations: [.seconds(Double(requests) / max(1, external[command] ?? 0))]
                )
                report.rows += runs.compactMap { rows[$0.0] } + [theirs]
                if let ours = rows["Hoard TLS"], let plain = rows["Hoard TCP"] {
                    report.comparisons += [(ours.label, theirs.label), (ours.label, plain.label)]
                    report.targets.append(
                        .ratio(
                            "Hoard TLS \(command) at \(concurrency) in flight ≥ 0.7× redis-benchmark --tls",
                            ours,
                            theirs,
                            atLeast: 0.7
                        )
                    )
                }
                if let socketRow = rows["Hoard unix"], let plain = rows["Hoard TCP"] {
                    report.comparisons.append((socketRow.label, plain.label))
                }
            }
        }
        report.summary = report.rows.map { ($0.label, $0.label) }
        report.notes.append(
            "redis-benchmark --tls --cacert ca.pem -t get,set -d 1024 -n \(requests) -c 16|64 -P 1; Hoard: the default pool "
                + "(\(RedisCacheLevel.Configuration.defaultPoolSize) connections)"
        )
        return report
    }

    /// An authority and a server certificate for 127.0.0.1 it signed, made with `openssl`.
    private static func makeCertificates(
        _ openssl: URL,
        in folder: URL
    ) throws -> (authority: String, certificate: String, key: String) {
        func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509"] + curve + [
                "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=bench",
            ],
            ["req"] + curve + ["-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=server"],
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-set_serial", "2", "-days", "2", "-extfile", path("server.ext"), "-out", path("server.pem"),
            ],
        ] {
            let process = Process()
            process.executableURL = openssl
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw BenchServer.Unavailable(description: "openssl \(arguments[0]) failed")
            }
        }
        return (path("ca.pem"), path("server.pem"), path("server.key"))
    }
}

import Foundation
import HoardRedis

/// Certificates for the TLS tests, made with the `openssl` tool in a folder of the test's own: an
/// authority, server certificates it signed (for 127.0.0.1, for another name only, expired), a
/// client certificate it signed (also as a PKCS #12 file), and an authority that signed nothing here.
struct TLSCertificates {
    let folder: URL

    /// Whether this platform's TLS shows a client certificate given as PEM files (Apple's takes
    /// only PKCS #12).
    static var clientCertificatesAreSupported: Bool {
        #if canImport(Network)
        false
        #else
        true
        #endif
    }

    /// Whether the TLS tests run: the build has TLS, or `HOARD_REQUIRE_TLS=1` makes them fail.
    static var isEnabled: Bool {
        RedisCacheLevel.Configuration.TLS.isAvailable || ProcessInfo.processInfo.environment["HOARD_REQUIRE_TLS"] == "1"
    }

    /// The authority's certificate (the CA file a client trusts).
    var authority: String { path("ca.pem") }
    /// An authority that signed none of the certificates.
    var otherAuthority: String { path("other-ca.pem") }
    /// A client certificate and its key, signed by ``authority``.
    var clientCertificate: String { path("client.pem") }
    var clientKey: String { path("client.key") }
    /// The client certificate and its key as one PKCS #12 file, opened with
    /// ``clientBundlePassword``.
    var clientBundle: String { path("client.p12") }
    /// The password of ``clientBundle``.
    var clientBundlePassword: String { "hoard-bundle-secret" }

    /// What a server presents.
    enum Server: String {
        /// Valid, for IP 127.0.0.1 and the name `localhost`.
        case good
        /// Valid, for the name `redis.test` only.
        case otherName = "other-name"
        /// For 127.0.0.1, expired a day ago.
        case expired
    }

    /// The `redis.conf` lines of a TLS server presenting `certificate`; with `clientsMustShowOne`,
    /// it refuses clients without a certificate signed by ``authority``.
    func serverConfiguration(_ certificate: Server = .good, clientsMustShowOne: Bool = false) -> [String] {
        [
            "tls-cert-file \(path("\(certificate.rawValue).pem"))",
            "tls-key-file \(path("\(certificate.rawValue).key"))",
            "tls-ca-cert-file \(authority)",
            "tls-auth-clients \(clientsMustShowOne ? "yes" : "no")",
        ]
    }

    /// Makes every certificate in `folder`.
    static func make(in folder: URL) async throws -> TLSCertificates {
        let certificates = TLSCertificates(folder: folder)
        try await certificates.makeAuthority("ca", "Hoard Test CA")
        try await certificates.makeAuthority("other-ca", "Hoard Other CA")
        try await certificates.sign(Server.good.rawValue, names: "IP:127.0.0.1,DNS:localhost", days: 30)
        try await certificates.sign(Server.otherName.rawValue, names: "DNS:redis.test", days: 30)
        try await certificates.sign(Server.expired.rawValue, names: "IP:127.0.0.1", days: -1)
        try await certificates.sign("client", names: "DNS:hoard-client", days: 30)
        try await Self.openssl([
            "pkcs12", "-export", "-in", certificates.clientCertificate, "-inkey", certificates.clientKey,
            "-out", certificates.clientBundle, "-passout", "pass:\(certificates.clientBundlePassword)",
        ])
        return certificates
    }

    private func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    private func makeAuthority(_ name: String, _ commonName: String) async throws {
        try await Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", path("\(name).key"), "-out", path("\(name).pem"), "-days", "30", "-subj", "/CN=\(commonName)",
        ])
    }

    /// A key and a certificate for `names` (subjectAltName entries), signed by the authority;
    /// a negative `days` makes one that expired.
    private func sign(_ name: String, names: String, days: Int) async throws {
        try await Self.openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(name)",
        ])
        let extensions = path("\(name).ext")
        try "subjectAltName=\(names)\n".write(toFile: extensions, atomically: true, encoding: .utf8)
        try await Self.openssl([
            "x509", "-req", "-in", path("\(name).csr"), "-CA", authority, "-CAkey", path("ca.key"),
            "-set_serial", String(Int.random(in: 1...Int(Int32.max))), "-days", String(days),
            "-extfile", extensions, "-out", path("\(name).pem"),
        ])
    }

    private static func openssl(_ arguments: [String]) async throws {
        // Through the shell, so that what it prints on its standard error is kept for the message
        // rather than strewn over the test log.
        let (lines, ending) = try await WorkerProcess.run(
            ["-c", "exec \"$0\" \"$@\" 2>&1", executable] + arguments,
            executable: "/bin/sh"
        )
        guard case .exited(0) = ending else {
            throw TestServerError("openssl \(arguments.prefix(2).joined(separator: " ")) \(ending): \(lines)")
        }
    }

    /// `openssl` on the PATH.
    static var executable: String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/openssl")
        {
            return "\(folder)/openssl"
        }
        return "/usr/bin/openssl"
    }
}

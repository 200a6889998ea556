import Foundation
import Hoard

extension RedisCacheLevel.Configuration {
    /// How the level secures its connections with TLS: whom it trusts, the name it expects, and
    /// the certificate it shows when the server asks for one.
    ///
    /// ```swift
    /// var configuration = try RedisCacheLevel.Configuration(url: "rediss://cache.internal:6380")
    /// configuration.tls?.certificateAuthorityFile = "/etc/redis/ca.pem"
    /// ```
    /// The server's certificate is always verified (its chain up to a trusted authority, its dates,
    /// and its name against ``serverName`` or the host), unless
    /// ``insecurelySkipsVerification`` says otherwise. TLS 1.2 is the oldest version accepted.
    /// The files are read at each connection, so certificates renewed in place are picked up at
    /// the next reconnection.
    public struct TLS: Sendable, Equatable {
        /// A PEM file of the authorities to trust, or `nil` (the default) for the system's trust
        /// store.
        public var certificateAuthorityFile: String?
        /// The name the server's certificate must carry, also sent as the server name indication.
        ///
        /// `nil` (the default) uses the configuration's host. A numeric address is checked against
        /// the certificate's IP addresses and sends no server name indication (SNI).
        public var serverName: String?
        /// The client's certificate, for servers that require mutual TLS (`tls-auth-clients
        /// yes`); `nil` (the default) shows none.
        ///
        /// Either a PEM file with the certificate (and its chain), its key in ``clientKeyFile`` or
        /// in the same file, or a PKCS #12 file (`.p12`) holding the certificate, its chain and
        /// its key, opened with ``clientCertificatePassword``. Apple platforms take only PKCS #12,
        /// the form their Security framework reads an identity from without the keychain
        /// (`openssl pkcs12 -export -in client.pem -inkey client.key -out client.p12` makes one;
        /// give it a password, which Apple's import expects), and on macOS only from macOS 15,
        /// where that import can stay in memory.
        public var clientCertificateFile: String?
        /// The PEM file of the client certificate's private key.
        ///
        /// `nil` reads it from ``clientCertificateFile``. Must be `nil` for a PKCS #12 file, which
        /// holds its key.
        public var clientKeyFile: String?
        /// The password of a PKCS #12 ``clientCertificateFile``.
        ///
        /// `nil` (the default) for a file without one. Unused for PEM files, whose key must not be
        /// encrypted.
        public var clientCertificatePassword: String?
        /// Accepts any certificate, from anyone, for any name.
        ///
        /// The connection is encrypted, but an attacker on the path can read and change
        /// everything. `false` by default; for tests against a throwaway server only.
        public var insecurelySkipsVerification: Bool

        /// TLS settings from their parts; with none, the server is verified against the system's
        /// trust store and the host name.
        public init(
            certificateAuthorityFile: String? = nil,
            serverName: String? = nil,
            clientCertificateFile: String? = nil,
            clientKeyFile: String? = nil
        ) {
            self.certificateAuthorityFile = certificateAuthorityFile
            self.serverName = serverName
            self.clientCertificateFile = clientCertificateFile
            self.clientKeyFile = clientKeyFile
            insecurelySkipsVerification = false
        }

        /// Whether this build can make TLS connections: always on Apple platforms; on Linux, when
        /// the package trait `TLS` is enabled.
        public static var isAvailable: Bool {
            #if canImport(Network) || (TLS && canImport(COpenSSL))
            true
            #else
            false
            #endif
        }

        /// Whether the file at `path` is a PKCS #12 bundle rather than PEM text.
        ///
        /// PEM files carry `-----BEGIN`; a PKCS #12 file is DER (binary). An unreadable file
        /// counts as PEM, whose loading then says what is wrong.
        static func isPKCS12(_ path: String) -> Bool {
            guard let bytes = FileManager.default.contents(atPath: path), !bytes.isEmpty else { return false }
            return bytes.first == 0x30 && bytes.range(of: Data("-----BEGIN".utf8)) == nil
        }

        /// Throws when the settings cannot work in this build.
        func validate() throws {
            func invalid(_ message: String) -> CacheError { .invalidConfiguration("Redis: \(message)") }
            guard Self.isAvailable else {
                throw invalid(
                    "this build has no TLS (rediss://). On Linux, enable the package trait TLS "
                        + "(.package(url: …, traits: [\"TLS\"]), or swift build --traits TLS) and install "
                        + "the system's OpenSSL headers (libssl-dev)."
                )
            }
            if clientKeyFile != nil, clientCertificateFile == nil {
                throw invalid("tls.clientKeyFile is set without tls.clientCertificateFile.")
            }
            for case let (name, path?) in [
                ("certificateAuthorityFile", certificateAuthorityFile),
                ("clientCertificateFile", clientCertificateFile), ("clientKeyFile", clientKeyFile),
            ] where !FileManager.default.isReadableFile(atPath: path) {
                throw invalid("tls.\(name) \"\(path)\" is not a readable file.")
            }
            if let clientCertificateFile {
                let isPKCS12 = Self.isPKCS12(clientCertificateFile)
                if isPKCS12, clientKeyFile != nil {
                    throw invalid(
                        "tls.clientCertificateFile is a PKCS #12 file, which holds its key: leave tls.clientKeyFile nil."
                    )
                }
                #if canImport(Network)
                #if os(macOS)
                if #unavailable(macOS 15) {
                    // Before 15, the import adds the identity to the default keychain, and the
                    // next connection's import of the same identity fails as a duplicate.
                    throw invalid("a client certificate needs macOS 15 or later on macOS.")
                }
                #endif
                if !isPKCS12 {
                    throw invalid(
                        "tls.clientCertificateFile \"\(clientCertificateFile)\" is not a PKCS #12 file: on Apple "
                            + "platforms, give the certificate and its key as one (openssl pkcs12 -export -in "
                            + "client.pem -inkey client.key -out client.p12), with tls.clientCertificatePassword."
                    )
                }
                #endif
            }
            if let serverName, serverName.isEmpty || serverName.utf8.contains(0) {
                throw invalid("tls.serverName must be a host name or an address.")
            }
        }
    }
}

// TLS on Apple platforms, with Network.framework: the only Darwin-specific part of HoardRedis.

#if canImport(Network)
import Darwin
import Foundation
import Hoard
import Network
import Security

/// Opens a TLS connection with Network.framework and hands the I/O thread one end of a socket
/// pair: two pumps move the plaintext between the other end and the connection.
///
/// So the I/O thread polls and pipelines exactly as over TCP, and the platform does TLS, with its
/// own trust evaluation. Verification is Hoard's (a verify block): the server's chain against the
/// given authorities (or the system's), and its name against ``RedisCacheLevel/Configuration/TLS/serverName``
/// or the host.
enum NetworkTLSBridge {
    static func open(
        _ configuration: RedisCacheLevel.Configuration,
        _ settings: RedisCacheLevel.Configuration.TLS,
        _ server: RedisCacheLevel.Configuration.Endpoint,
        until deadline: ContinuousClock.Instant
    ) -> Result<any ByteStream, RedisFailure> {
        let anchors: [SecCertificate]?
        switch settings.certificateAuthorityFile.map(Self.certificates(inPEMFile:)) {
        case .success(let found)?: anchors = found
        case .failure(let failure)?: return .failure(failure)
        case nil: anchors = nil
        }
        let identity: sec_identity_t?
        let password = settings.clientCertificatePassword
        switch settings.clientCertificateFile.map({ Self.identity(inPKCS12File: $0, password: password) }) {
        case .success(let found)?: identity = found
        case .failure(let failure)?: return .failure(failure)
        case nil: identity = nil
        }
        guard let port = UInt16(exactly: server.port).flatMap(NWEndpoint.Port.init(rawValue:)) else {
            return .failure(RedisFailure(.connect, "the port \(server.port) is out of range"))
        }
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, SOCK_STREAM, 0, &ends) == 0 else {
            return .failure(.system(.connect, "socketpair", errno: errno))
        }
        let local = Socket(descriptor: ends[0])
        let remote = Socket(descriptor: ends[1])
        var one: Int32 = 1
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = setsockopt(end, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        // The I/O thread's end never blocks; the pumps' end does, which is their back pressure.
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)

        let name = settings.serverName ?? server.host
        let refusal = Locked<String?>(nil)
        let queue = DispatchQueue(label: "Hoard Redis TLS \(configuration.server)")
        let options = NWProtocolTLS.Options()
        let security = options.securityProtocolOptions
        sec_protocol_options_set_min_tls_protocol_version(security, .TLSv12)
        if !SocketAddress.isNumeric(name) { sec_protocol_options_set_tls_server_name(security, name) }
        // Shown when the server asks for a certificate (mutual TLS).
        if let identity { sec_protocol_options_set_local_identity(security, identity) }
        let skips = settings.insecurelySkipsVerification
        sec_protocol_options_set_verify_block(
            security,
            { _, trust, complete in
                if skips { return complete(true) }
                let evaluated = sec_trust_copy_ref(trust).takeRetainedValue()
                SecTrustSetPolicies(evaluated, SecPolicyCreateSSL(true, name as CFString))
                if let anchors {
                    SecTrustSetAnchorCertificates(evaluated, anchors as CFArray)
                    SecTrustSetAnchorCertificatesOnly(evaluated, true)
                }
                var error: CFError?
                let trusted = SecTrustEvaluateWithError(evaluated, &error)
                if !trusted {
                    refusal.withLock { $0 = error.map { CFErrorCopyDescription($0) as String } ?? "not trusted" }
                }
                complete(trusted)
            },
            queue
        )
        let tcp = NWProtocolTCP.Options()
        tcp.noDelay = true
        let connection = NWConnection(
            host: NWEndpoint.Host(server.host),
            port: port,
            using: NWParameters(tls: options, tcp: tcp)
        )
        switch start(connection, on: queue, until: deadline, timeout: configuration.connectTimeout) {
        case .success:
            Pump(connection: connection, remote: remote).start()
            return .success(local)
        case .failure(let failure):
            connection.cancel()
            if let reason = refusal.withLock({ $0 }) {
                return .failure(RedisFailure(.handshake, "the server's TLS certificate was not accepted: \(reason)"))
            }
            return .failure(failure)
        }
    }

    /// Starts `connection` and waits until it is ready, failed, or `deadline` passed.
    private static func start(
        _ connection: NWConnection,
        on queue: DispatchQueue,
        until deadline: ContinuousClock.Instant,
        timeout: Duration
    ) -> Result<Void, RedisFailure> {
        let outcome = Locked<Result<Void, RedisFailure>?>(nil)
        let settled = DispatchSemaphore(value: 0)
        connection.stateUpdateHandler = { state in
            let result: Result<Void, RedisFailure>
            switch state {
            case .ready: result = .success(())
            case .failed(let error), .waiting(let error): result = .failure(failure(error))
            case .cancelled: result = .failure(RedisFailure(.closed, "the TLS connection was cancelled"))
            default: return
            }
            let isFirst = outcome.withLock { outcome in
                guard outcome == nil else { return false }
                outcome = result
                return true
            }
            if isFirst { settled.signal() }
        }
        connection.start(queue: queue)
        // The I/O thread, not a cooperative one: blocking here is what it is for.
        let remaining = ContinuousClock.now.duration(to: deadline)
        let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) * 1e-18
        guard settled.wait(timeout: .now() + max(0, seconds)) == .success, let result = outcome.withLock({ $0 }) else {
            return .failure(
                RedisFailure(.timeout, "no TLS handshake within \(timeout) (a port without TLS stays silent)")
            )
        }
        return result
    }

    private static func failure(_ error: NWError) -> RedisFailure {
        switch error {
        case .tls: RedisFailure(.handshake, "the TLS handshake failed: \(error)")
        case .posix(let code): .system(.connect, "connect", errno: code.rawValue)
        default: RedisFailure(.connect, "\(error)")
        }
    }

    /// The certificates of a PEM file.
    private static func certificates(inPEMFile path: String) -> Result<[SecCertificate], RedisFailure> {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            return .failure(RedisFailure(.handshake, "TLS set-up failed: cannot read \(path)"))
        }
        var certificates: [SecCertificate] = []
        for block in text.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst() {
            guard let body = block.components(separatedBy: "-----END CERTIFICATE-----").first,
                let der = Data(base64Encoded: body, options: .ignoreUnknownCharacters),
                let certificate = SecCertificateCreateWithData(nil, der as CFData)
            else {
                return .failure(
                    RedisFailure(.handshake, "TLS set-up failed: \(path) holds a certificate that cannot be read")
                )
            }
            certificates.append(certificate)
        }
        guard !certificates.isEmpty else {
            return .failure(RedisFailure(.handshake, "TLS set-up failed: \(path) holds no PEM certificate"))
        }
        return .success(certificates)
    }

    /// The client identity (certificate, chain and key) of a PKCS #12 file.
    ///
    /// PKCS #12 is the form the Security framework reads an identity from without a keychain item.
    /// The file is read at each connection, so a file renewed in place is picked up at the next
    /// reconnection.
    private static func identity(inPKCS12File path: String, password: String?) -> Result<sec_identity_t, RedisFailure> {
        guard let bytes = FileManager.default.contents(atPath: path) else {
            return .failure(RedisFailure(.handshake, "TLS set-up failed: cannot read \(path)"))
        }
        var options: [String: Any] = [kSecImportExportPassphrase as String: password ?? ""]
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            // Kept in memory, as iOS does anyway. Earlier macOS releases would add the identity to
            // the keychain (the next import of it would fail as a duplicate): the configuration
            // refuses a client certificate there.
            options[kSecImportToMemoryOnly as String] = true
        }
        var items: CFArray?
        let status = SecPKCS12Import(bytes as CFData, options as CFDictionary, &items)
        guard status == errSecSuccess,
            let item = (items as? [[String: Any]])?.first,
            let found = item[kSecImportItemIdentity as String]
        else {
            let reason = status == errSecSuccess ? "it holds no identity" : Self.message(status)
            return .failure(
                RedisFailure(
                    .handshake,
                    "TLS set-up failed: cannot read the PKCS #12 client certificate in \(path): \(reason)"
                )
            )
        }
        // The dictionary's value is a SecIdentity: a Core Foundation type, whose cast cannot fail.
        let secIdentity = found as! SecIdentity
        // The chain the file holds, its certificate first: an identity alone carries no
        // intermediates, which a server that trusts only the root needs.
        let chain = item[kSecImportItemCertChain as String] as? [SecCertificate] ?? []
        let made =
            chain.isEmpty
            ? sec_identity_create(secIdentity)
            : sec_identity_create_with_certificates(secIdentity, chain as CFArray)
        guard let identity = made else {
            return .failure(RedisFailure(.handshake, "TLS set-up failed: the identity in \(path) cannot be used"))
        }
        return .success(identity)
    }

    /// The Security framework's words for `status`.
    private static func message(_ status: OSStatus) -> String {
        (SecCopyErrorMessageString(status, nil) as String?) ?? "error \(status)"
    }

    /// Moves plaintext both ways between the pumps' end of the socket pair and the connection,
    /// until either side ends; then ends the other.
    private final class Pump: Sendable {
        let connection: NWConnection
        let remote: Socket

        init(connection: NWConnection, remote: Socket) {
            self.connection = connection
            self.remote = remote
        }

        func start() {
            receive()
            let thread = Thread { [self] in sendLoop() }
            thread.name = "Hoard Redis TLS pump"
            thread.start()
        }

        /// From the server to the I/O thread.
        private func receive() {
            connection.receive(minimumIncompleteLength: 1, maximumLength: 64 << 10) {
                [self] data, _, isComplete, error in
                if let data, !data.isEmpty, !write(data) { return end() }
                if isComplete || error != nil { return end() }
                receive()
            }
        }

        /// Writes all of `data` to the pair, blocking while the I/O thread catches up.
        private func write(_ data: Data) -> Bool {
            data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    guard case .done(let count) = remote.send(UnsafeRawBufferPointer(rebasing: bytes[offset...])) else {
                        return false
                    }
                    offset += count
                }
                return true
            }
        }

        /// From the I/O thread to the server, one read at a time, each sent before the next.
        private func sendLoop() {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 8)
            defer { buffer.deallocate() }
            let sent = DispatchSemaphore(value: 0)
            let failed = Locked(false)
            while case .done(let count) = remote.receive(into: buffer), count > 0 {
                connection.send(
                    content: Data(UnsafeRawBufferPointer(rebasing: buffer[..<count])),
                    completion: .contentProcessed { error in
                        if error != nil { failed.withLock { $0 = true } }
                        sent.signal()
                    }
                )
                sent.wait()
                if failed.withLock({ $0 }) { break }
            }
            end()
        }

        private func end() {
            connection.cancel()
            remote.shutdown()
        }
    }
}
#endif

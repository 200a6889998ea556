// TLS on Linux, with the system's OpenSSL (the package trait `TLS`).

#if TLS && canImport(COpenSSL)
import COpenSSL
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TLS client session over a non-blocking socket.
///
/// OpenSSL reads and writes memory buffers, never the socket: this class moves the encrypted
/// bytes between them and the socket with ``Socket``'s own calls. So a send can never raise
/// `SIGPIPE`, and what OpenSSL decrypted ahead is always handed over before the thread polls again.
final class OpenSSLStream: ByteStream {
    let socket: Socket
    private let context: OpaquePointer
    private let session: OpaquePointer
    /// The encrypted bytes from the server, which the session reads.
    private let incoming: OpaquePointer
    /// The encrypted bytes for the server, which the session writes.
    private let outgoing: OpaquePointer
    /// Encrypted bytes the socket did not take yet, from `pendingStart` on.
    private var pending: [UInt8] = []
    private var pendingStart = 0
    /// Allocated once nothing can fail before `deinit` runs, which frees it.
    private let chunk: UnsafeMutableRawBufferPointer

    /// Sets up a session for `socket`, connected to `host`, with `settings`; the handshake is
    /// ``continueHandshake()``'s.
    init(over socket: Socket, host: String, settings: RedisCacheLevel.Configuration.TLS) throws(RedisFailure) {
        // What an earlier failure left on this thread's queue must not be taken for this one's.
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Self.failure("SSL_CTX_new failed") }
        // A session copies the context's settings when it is made: they come first.
        do {
            try Self.configure(context, settings)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        guard let session = SSL_new(context) else {
            SSL_CTX_free(context)
            throw Self.failure("SSL_new failed")
        }
        let incoming = BIO_new(BIO_s_mem())
        let outgoing = BIO_new(BIO_s_mem())
        guard let incoming, let outgoing else {
            BIO_free(incoming)
            BIO_free(outgoing)
            SSL_free(session)
            SSL_CTX_free(context)
            throw Self.failure("BIO_new failed")
        }
        self.socket = socket
        self.context = context
        self.session = session
        self.incoming = incoming
        self.outgoing = outgoing
        chunk = .allocate(byteCount: 32 << 10, alignment: 8)
        // An empty buffer means "wait for more", not the end of the stream.
        hoard_BIO_set_mem_eof_return(incoming, -1)
        SSL_set_bio(session, incoming, outgoing)
        SSL_set_connect_state(session)
        try expect(settings.serverName ?? host)
    }

    deinit {
        SSL_free(session)  // and both buffers with it
        SSL_CTX_free(context)
        chunk.deallocate()
    }

    /// Whom the context trusts, and the certificate it shows.
    private static func configure(
        _ context: OpaquePointer,
        _ settings: RedisCacheLevel.Configuration.TLS
    ) throws(RedisFailure) {
        // An encrypted key fails to load, with OpenSSL's reason, instead of asking for its pass
        // phrase on the terminal and blocking the I/O thread.
        SSL_CTX_set_default_passwd_cb(context) { _, _, _, _ in 0 }
        guard hoard_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw failure("setting the oldest TLS version failed")
        }
        if settings.insecurelySkipsVerification {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            if let file = settings.certificateAuthorityFile {
                guard SSL_CTX_load_verify_locations(context, file, nil) == 1 else {
                    throw failure("cannot read the certificate authorities in \(file)")
                }
            } else if SSL_CTX_set_default_verify_paths(context) != 1 {
                throw failure("cannot find the system's trust store")
            }
        }
        if settings.clientCertificateFile == nil {
            // A server that requires one refuses the session only once the handshake is over
            // (TLS 1.3), and may reset the connection before its alert arrives: noted, the request
            // explains such a loss (``wasAskedForMissingCertificate``).
            hoard_SSL_CTX_note_certificate_requests(context)
        }
        if let bundle = settings.clientCertificateFile, RedisCacheLevel.Configuration.TLS.isPKCS12(bundle) {
            guard hoard_SSL_CTX_use_PKCS12_file(context, bundle, settings.clientCertificatePassword ?? "") == 1 else {
                throw failure(
                    "cannot read the PKCS #12 client certificate in \(bundle) (not a PKCS #12 file, a wrong "
                        + "password, or a key that does not match its certificate)"
                )
            }
        } else if let certificate = settings.clientCertificateFile {
            let key = settings.clientKeyFile ?? certificate
            guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
                throw failure("cannot read the client certificate in \(certificate)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(context) == 1
            else {
                throw failure("cannot read the client certificate's key in \(key), or it does not match")
            }
        }
    }

    /// Sets the name (or address) the server's certificate must carry, and the SNI for a name.
    private func expect(_ name: String) throws(RedisFailure) {
        if SocketAddress.isNumeric(name) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(session), name) == 1 else {
                throw Self.failure("cannot expect the address \(name)")
            }
        } else {
            guard hoard_SSL_set_tlsext_host_name(session, name) == 1, SSL_set1_host(session, name) == 1 else {
                throw Self.failure("cannot expect the name \(name)")
            }
        }
    }

    /// What the handshake needs next.
    enum HandshakeStep {
        case done
        /// Waiting for the server's bytes (and for the socket to take ours, while
        /// ``hasPendingOutput``).
        case waiting
        case failed(RedisFailure)
    }

    /// Runs the handshake as far as the bytes at hand allow.
    func continueHandshake() -> HandshakeStep {
        if case .failed(let failure) = step(flush(), during: "the TLS handshake") { return .failed(failure) }
        if case .failed(let failure) = step(readSocket(), during: "the TLS handshake") { return .failed(failure) }
        ERR_clear_error()
        let status = SSL_connect(session)
        let error = SSL_get_error(session, status)
        takeOutgoing()
        if case .failed(let failure) = step(flush(), during: "the TLS handshake") { return .failed(failure) }
        if status == 1 { return .done }
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .waiting }
        let verification = SSL_get_verify_result(session)
        if verification != X509_V_OK {
            let reason = String(cString: X509_verify_cert_error_string(verification))
            return .failed(
                RedisFailure(.handshake, "the server's TLS certificate was not accepted: \(reason)")
            )
        }
        return .failed(RedisFailure(.handshake, "the TLS handshake failed: \(Self.errors(or: error))"))
    }

    /// A failed transfer as a handshake failure; `nil` for one that went on.
    private func step(_ transfer: Socket.Transfer, during what: String) -> HandshakeStep {
        switch transfer {
        case .done, .wouldBlock: .waiting
        case .closed: .failed(RedisFailure(.connectionLost, "the server closed the connection during \(what)"))
        case .failed(let error): .failed(.system(.connect, "recv", errno: error))
        case .refused(let reason): .failed(RedisFailure(.handshake, "the TLS handshake failed: \(reason)"))
        }
    }

    var hasPendingOutput: Bool { pendingStart < pending.count }

    /// Whether the server asked for a client certificate during a TLS 1.3 handshake, and the
    /// session had none to send.
    ///
    /// Only TLS 1.3 refuses a missing certificate after its handshake; in TLS 1.2 the refusal is a
    /// failed handshake.
    var wasAskedForMissingCertificate: Bool {
        hoard_SSL_was_asked_for_certificate(session) != 0 && SSL_version(session) == TLS1_3_VERSION
    }

    func send(_ bytes: UnsafeRawBufferPointer) -> Socket.Transfer {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .done(0) }
        // Bytes still held back come first; take no more until the socket has them.
        switch flush() {
        case .done: break
        case let other: return other
        }
        if hasPendingOutput { return .wouldBlock }
        ERR_clear_error()
        let written = SSL_write(session, base, Int32(min(bytes.count, 256 << 10)))
        guard written > 0 else {
            // A renegotiation's own bytes still go out.
            let failed = transfer(forFailed: written)
            takeOutgoing()
            if case .failed(let error) = flush() { return .failed(error) }
            return failed
        }
        takeOutgoing()
        switch flush() {
        case .failed(let error): return .failed(error)
        case .refused(let reason): return .refused(reason)
        case .closed: return .closed
        case .done, .wouldBlock: return .done(Int(written))
        }
    }

    func flush() -> Socket.Transfer {
        while pendingStart < pending.count {
            let start = pendingStart
            switch pending.withUnsafeBytes({ socket.send(UnsafeRawBufferPointer(rebasing: $0[start...])) }) {
            case .done(let count): pendingStart += count
            case let other: return other
            }
        }
        pending.removeAll(keepingCapacity: pending.capacity <= 1 << 20)
        pendingStart = 0
        return .done(0)
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Socket.Transfer {
        guard let base = buffer.baseAddress else { return .done(0) }
        var filled = 0
        while filled < buffer.count {
            ERR_clear_error()
            let read = SSL_read(session, base + filled, Int32(min(buffer.count - filled, Int(Int32.max))))
            if read > 0 {
                filled += Int(read)
                continue
            }
            let error = SSL_get_error(session, read)
            // A key update, say, may have something to answer.
            takeOutgoing()
            if case .failed(let number) = flush() { return filled > 0 ? .done(filled) : .failed(number) }
            guard error == SSL_ERROR_WANT_READ else {
                if filled > 0 { return .done(filled) }
                return error == SSL_ERROR_ZERO_RETURN ? .closed : .refused(Self.errors(or: error))
            }
            switch readSocket() {
            case .done(let count) where count > 0: continue
            case .done, .wouldBlock: return filled > 0 ? .done(filled) : .wouldBlock
            case let other: return filled > 0 ? .done(filled) : other
            }
        }
        return .done(filled)
    }

    /// Moves what the socket has into the session's input.
    private func readSocket() -> Socket.Transfer {
        var total = 0
        while true {
            switch socket.receive(into: chunk) {
            case .done(let count):
                _ = BIO_write(incoming, chunk.baseAddress, Int32(count))
                total += count
                if count < chunk.count { return .done(total) }
            case .wouldBlock: return total > 0 ? .done(total) : .wouldBlock
            case let other: return total > 0 ? .done(total) : other
            }
        }
    }

    /// Moves what the session wrote to ``pending``.
    private func takeOutgoing() {
        while hoard_BIO_pending(outgoing) > 0 {
            let count = BIO_read(outgoing, chunk.baseAddress, Int32(chunk.count))
            guard count > 0 else { return }
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<Int(count)]))
        }
    }

    private func transfer(forFailed status: Int32) -> Socket.Transfer {
        let error = SSL_get_error(session, status)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .wouldBlock }
        return error == SSL_ERROR_ZERO_RETURN ? .closed : .refused(Self.errors(or: error))
    }

    /// OpenSSL's queued errors, in one line, or the `SSL_get_error` code when none is queued.
    private static func errors(or code: Int32) -> String {
        var reasons: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while case let error = ERR_get_error(), error != 0 {
            ERR_error_string_n(error, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        if reasons.isEmpty { return code == SSL_ERROR_SYSCALL ? "the connection ended" : "error \(code)" }
        return reasons.joined(separator: "; ")
    }

    private static func failure(_ what: String) -> RedisFailure {
        RedisFailure(.handshake, "TLS set-up failed: \(what): \(errors(or: 0))")
    }
}

extension ConnectionLoop {
    /// Runs the TLS handshake on a connected socket, before `deadline`.
    func secure(
        _ socket: Socket,
        _ settings: RedisCacheLevel.Configuration.TLS,
        host: String,
        until deadline: ContinuousClock.Instant
    ) -> Result<any ByteStream, RedisFailure> {
        let stream: OpenSSLStream
        do {
            stream = try OpenSSLStream(over: socket, host: host, settings: settings)
        } catch {
            return .failure(error)
        }
        while true {
            switch stream.continueHandshake() {
            case .done: return .success(stream)
            case .failed(let failure): return .failure(failure)
            case .waiting:
                if ContinuousClock.now >= deadline {
                    return .failure(
                        RedisFailure(
                            .timeout,
                            "no TLS handshake within \(configuration.connectTimeout) (a port without TLS stays silent)"
                        )
                    )
                }
                if case .failure(let failure) = wait(socket, events(stream, writing: false), until: deadline) {
                    return .failure(failure)
                }
            }
        }
    }
}
#endif

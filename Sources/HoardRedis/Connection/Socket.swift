import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A non-blocking stream socket (TCP or Unix-domain), closed when the last reference to it goes.
///
/// Closing on release, never by hand, is what makes sharing it safe: a caller still writing to a
/// connection the I/O thread gave up holds the object, so the descriptor cannot be closed and its
/// number reused by another file under that write. ``shutdown()`` ends the connection at once.
final class Socket: Sendable {
    let descriptor: Int32

    /// Takes ownership of an open descriptor, which it closes when the last reference goes.
    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// What a non-blocking send or receive did.
    enum Transfer {
        case done(Int)
        case wouldBlock
        /// The peer closed the connection (receive only).
        case closed
        case failed(Int32)
        /// The TLS session failed (a certificate refused, an alert from the server), and why.
        case refused(String)
    }

    /// Creates a non-blocking, close-on-exec socket for `address` and starts connecting it.
    ///
    /// - Returns: The socket and whether the connection is already established (it rarely is).
    static func startConnecting(to address: SocketAddress) -> Result<(Socket, isConnected: Bool), RedisFailure> {
        #if canImport(Darwin)
        let descriptor = Darwin.socket(address.family, SOCK_STREAM, 0)
        #elseif canImport(Glibc)
        let descriptor = Glibc.socket(
            address.family,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0
        )
        #else
        let descriptor = Musl.socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
        guard descriptor >= 0 else { return .failure(.system(.connect, "socket", errno: errno)) }
        let socket = Socket(descriptor: descriptor)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var one: Int32 = 1
        if address.family != AF_UNIX {
            _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        #if canImport(Darwin)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        let status = address.storage.withUnsafeBytes { bytes in
            connect(descriptor, bytes.baseAddress?.assumingMemoryBound(to: sockaddr.self), address.length)
        }
        if status == 0 { return .success((socket, true)) }
        guard errno == EINPROGRESS || errno == EINTR else {
            return .failure(.system(.connect, "connect", errno: errno))
        }
        return .success((socket, false))
    }

    /// The outcome of a connection started by ``startConnecting(to:)``, once the socket is writable.
    func connectionError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
        return error
    }

    /// Sends what it can of `bytes` without blocking.
    func send(_ bytes: UnsafeRawBufferPointer) -> Transfer {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .done(0) }
        #if canImport(Darwin)
        let flags: Int32 = 0
        #else
        let flags = Int32(MSG_NOSIGNAL)
        #endif
        while true {
            #if canImport(Darwin)
            let sent = Darwin.send(descriptor, base, bytes.count, flags)
            #elseif canImport(Glibc)
            let sent = Glibc.send(descriptor, base, bytes.count, flags)
            #else
            let sent = Musl.send(descriptor, base, bytes.count, flags)
            #endif
            if sent >= 0 { return .done(sent) }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .failed(errno)
        }
    }

    /// Receives what is there, up to `buffer.count` bytes, without blocking.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Transfer {
        guard let base = buffer.baseAddress else { return .done(0) }
        while true {
            let received = recv(descriptor, base, buffer.count, 0)
            if received > 0 { return .done(received) }
            if received == 0 { return .closed }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .failed(errno)
        }
    }

    /// Ends the connection in both directions; the descriptor stays open until the last reference goes.
    func shutdown() {
        #if canImport(Darwin)
        _ = Darwin.shutdown(descriptor, SHUT_RDWR)
        #else
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
        #endif
    }
}

/// An address to connect to: IPv4, IPv6 or a Unix-domain socket's path, as the system's `sockaddr`
/// bytes.
struct SocketAddress: Sendable {
    let family: Int32
    /// The bytes of a `sockaddr_in`, `sockaddr_in6` or `sockaddr_un`.
    let storage: [UInt8]

    var length: socklen_t { socklen_t(storage.count) }

    /// The longest socket path, in bytes, that a `sockaddr_un` holds with its terminating zero.
    static var longestSocketPath: Int {
        MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
    }

    /// The address of the Unix-domain socket at `path`.
    static func unix(path: String) -> Result<SocketAddress, RedisFailure> {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= longestSocketPath, !bytes.contains(0) else {
            return .failure(
                RedisFailure(.connect, "the socket path \(path) is empty, too long or holds a zero byte")
            )
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        #if canImport(Darwin)
        address.sun_len = UInt8(MemoryLayout<sockaddr_un>.size)
        #endif
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: bytes)
            sunPath[bytes.count] = 0
        }
        let storage = withUnsafeBytes(of: &address) { Array($0) }
        return .success(SocketAddress(family: AF_UNIX, storage: storage))
    }

    /// The addresses of `host`, a numeric address or a name, at `port`.
    ///
    /// Names are looked up with `getaddrinfo`, which blocks: call it on a thread of its own.
    static func resolve(host: String, port: Int) -> Result<[SocketAddress], RedisFailure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let reason = String(cString: gai_strerror(status))
            return .failure(RedisFailure(.connect, "cannot resolve the host name \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            let info = current.pointee
            if let address = info.ai_addr, info.ai_family == AF_INET || info.ai_family == AF_INET6 {
                let bytes = UnsafeRawBufferPointer(start: address, count: Int(info.ai_addrlen))
                addresses.append(SocketAddress(family: info.ai_family, storage: Array(bytes)))
            }
            entry = info.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(RedisFailure(.connect, "the host name \(host) has no IPv4 or IPv6 address"))
        }
        return .success(addresses)
    }

    /// Whether `host` is a numeric IPv4 or IPv6 address, which resolves without a lookup.
    static func isNumeric(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

/// A pipe whose only use is to wake a thread waiting in `poll`.
final class WakePipe: Sendable {
    let readEnd: Int32
    let writeEnd: Int32

    /// Creates the pipe, non-blocking and close-on-exec; `nil` when the process is out of descriptors.
    init?() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the waiting thread; a full pipe means it is awake already.
    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe, after a wake-up.
    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while bytes.withUnsafeMutableBytes({ read(readEnd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// Waits for `events` on `socket` (if any) and for the wake pipe, at most until `deadline`.
///
/// - Returns: The events that happened on the socket (0 when none, after a wake-up or at the
///   deadline); `POLLERR`/`POLLHUP` are reported as they come.
func waitForEvents(
    on socket: Socket?,
    _ events: Int16,
    wake: WakePipe,
    until deadline: ContinuousClock.Instant?
) -> Int16 {
    var descriptors = [pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0)]
    if let socket { descriptors.append(pollfd(fd: socket.descriptor, events: events, revents: 0)) }
    let timeout: Int32
    if let deadline {
        let remaining = ContinuousClock.now.duration(to: deadline)
        if remaining <= .zero {
            timeout = 0
        } else {
            let (seconds, attoseconds) = remaining.components
            // Rounded up, so that the thread never wakes before the deadline and spins.
            let milliseconds = seconds * 1_000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            timeout = Int32(clamping: milliseconds)
        }
    } else {
        timeout = -1
    }
    let count = descriptors.withUnsafeMutableBufferPointer { buffer in
        poll(buffer.baseAddress, nfds_t(buffer.count), timeout)
    }
    if count > 0 && descriptors[0].revents != 0 { wake.drain() }
    guard count > 0, descriptors.count > 1 else { return 0 }
    return descriptors[1].revents
}

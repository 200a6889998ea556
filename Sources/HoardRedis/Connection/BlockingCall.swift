import Foundation
import Hoard

/// A call a connection attempt makes that may block for long, made on a thread of its own: a host
/// name lookup (`getaddrinfo` waits for the resolver), the user's credentials provider.
///
/// The connection's I/O thread waits for it in `poll`, woken when it returns
/// (``ConnectionLoop/wait(for:until:)``), so that meanwhile it still times its requests out at
/// their own deadlines and sees a stop. A thread blocked in such a call cannot be interrupted: when
/// the attempt that made the call gives up on it, the call runs on, and the connection's next
/// attempt takes it over (its outcome, if it came meanwhile) instead of making another. So a
/// resolver or a provider that hangs holds one thread of a connection, not one per attempt.
final class BlockingCall<Value: Sendable>: Sendable {
    private let result = Locked<Result<Value, RedisFailure>?>(nil)

    /// Makes the call on a new thread, which wakes `wake` when the call returns.
    init(waking wake: WakePipe, _ body: @escaping @Sendable () -> Result<Value, RedisFailure>) {
        Thread.detachNewThread { [result] in
            let outcome = body()
            result.withLock { $0 = outcome }
            wake.wake()
        }
    }

    /// The call's outcome, once it returned.
    var outcome: Result<Value, RedisFailure>? { result.withLock { $0 } }
}

import Foundation
import Hoard

/// One command on its way to the server, and the caller waiting for its reply.
///
/// It is finished exactly once, by whoever comes first: the I/O thread with the reply, the I/O thread
/// at the deadline, the broken connection, or the caller's cancellation. A request finished early
/// stays in its connection's queue until its reply arrives (and is dropped), so that the replies
/// behind it still meet their own requests.
///
/// An idempotent request may be sent a second time, once (``takeRetry()``), when its connection was
/// found closed before any byte of its reply came.
final class RedisRequest: Sendable {
    /// Told the outcome, once, on whichever thread finished the request.
    typealias Completion = @Sendable (Result<RESPValue, RedisFailure>) -> Void

    private enum State: Sendable {
        /// Neither a waiter nor a result yet.
        case idle
        case waiting(Completion)
        /// Finished before the waiter arrived.
        case finished(Result<RESPValue, RedisFailure>)
        case done
    }

    /// The encoded command.
    let bytes: [UInt8]
    /// The command's name and key, for messages.
    let name: String
    let key: String?
    /// When the caller stops waiting.
    let deadline: ContinuousClock.Instant
    /// Whether the command may be sent twice (``RESPCommand/isIdempotent``).
    let isIdempotent: Bool
    private let state = Locked(State.idle)
    /// Whether the request's one retry is taken.
    private let hasRetried = Locked(false)

    init(_ command: RESPCommand, key: String?, deadline: ContinuousClock.Instant) {
        bytes = command.bytes
        name = command.name
        isIdempotent = command.isIdempotent
        self.key = key
        self.deadline = deadline
    }

    /// Takes the request's one retry: `true` for an idempotent request still waiting for its outcome
    /// that was not retried before, and never again after that.
    func takeRetry() -> Bool {
        guard isIdempotent, !isFinished else { return false }
        return hasRetried.withLock { hasRetried in
            defer { hasRetried = true }
            return !hasRetried
        }
    }

    /// Whether the request has its outcome already (its reply, if one comes, is dropped).
    var isFinished: Bool {
        state.withLock { state in
            switch state {
            case .idle, .waiting: false
            case .finished, .done: true
            }
        }
    }

    /// Hands over the waiting caller; tells it at once when the request finished already.
    func wait(_ completion: @escaping Completion) {
        let early = state.withLock { state -> Result<RESPValue, RedisFailure>? in
            if case .finished(let result) = state {
                state = .done
                return result
            }
            state = .waiting(completion)
            return nil
        }
        if let early { completion(early) }
    }

    /// Finishes the request; does nothing when it is finished already.
    ///
    /// - Returns: Whether this call finished it.
    @discardableResult
    func finish(_ result: Result<RESPValue, RedisFailure>) -> Bool {
        let completion = state.withLock { state -> Completion?? in
            switch state {
            case .idle:
                state = .finished(result)
                return .some(nil)
            case .waiting(let completion):
                state = .done
                return completion
            case .finished, .done:
                return nil
            }
        }
        guard let completion else { return false }
        completion?(result)
        return true
    }
}

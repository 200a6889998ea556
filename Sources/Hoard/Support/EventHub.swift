/// Hands every event to every subscriber's `AsyncStream`, never waiting for one.
///
/// Each subscriber gets a stream buffering up to a limit of the newest events; when a subscriber
/// falls further behind, its oldest unread events are dropped. Yielding never blocks the emitter.
final class EventHub<Event: Sendable>: Sendable {
    private struct State {
        var nextID: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<Event>.Continuation] = [:]
    }

    private let state = Locked(State())
    /// Told whether anyone subscribes, each time that may have changed; called after the hub's lock
    /// is released, with the hub, whose ``isObserved`` is the truth to read.
    private let onObservationChange: @Sendable (EventHub) -> Void

    init(onObservationChange: @escaping @Sendable (EventHub) -> Void = { _ in }) {
        self.onObservationChange = onObservationChange
    }

    /// Whether any stream is subscribed.
    var isObserved: Bool { state.withLock { !$0.subscribers.isEmpty } }

    /// A new subscription: a stream that gets every event emitted from now until it terminates.
    func subscribe(bufferingNewest limit: Int) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(limit))
        let (id, isFirst) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            return (id, state.subscribers.count == 1)
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        if isFirst { onObservationChange(self) }
        return stream
    }

    private func unsubscribe(_ id: UInt64) {
        let isLast = state.withLock { state in
            state.subscribers.removeValue(forKey: id) != nil && state.subscribers.isEmpty
        }
        if isLast { onObservationChange(self) }
    }

    /// Delivers an event to every subscriber; builds it only when there is one.
    func emit(_ event: @autoclosure () -> Event) {
        let subscribers = state.withLock { $0.subscribers.isEmpty ? [] : Array($0.subscribers.values) }
        guard !subscribers.isEmpty else { return }
        let event = event()
        for subscriber in subscribers { subscriber.yield(event) }
    }

    /// Delivers several events, in order, to every subscriber.
    func emit(_ events: [Event]) {
        guard !events.isEmpty else { return }
        let subscribers = state.withLock { $0.subscribers.isEmpty ? [] : Array($0.subscribers.values) }
        for subscriber in subscribers {
            for event in events { subscriber.yield(event) }
        }
    }

    /// Ends every stream.
    func finish() {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }
}

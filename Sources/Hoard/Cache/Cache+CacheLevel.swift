extension Cache: CacheLevel {
    /// A cache's keys are strings.
    public typealias Key = String

    /// Removes every value from memory and disk: ``removeAll()`` under the name a cache level uses.
    public func clear() async {
        removeAll()
    }

    /// Empties the memory level because the system is short of memory.
    ///
    /// Each value removed is an eviction with reason ``EvictionReason/memoryPressure``: counted in
    /// ``statistics``, told to the delegate (``CacheDelegate/cache(_:willEvictFromMemory:forKey:)``)
    /// and to the event stream. The disk level keeps everything.
    public func onMemoryWarning() {
        var outcome = CacheOutcome<Value>(key: "")
        outcome.memoryEvictions = engine.evictAllFromMemory(.memoryPressure)
        reporter.deliver(outcome, from: self)
    }
}

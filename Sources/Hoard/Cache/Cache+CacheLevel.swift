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
        guard let memory else { return }
        let removed = stripes.changeAll { memory.removeAll { _, _ in true } }
        reportMemoryEvictions(removed.map { ($0.key, $0.value.value, .memoryPressure) })
    }
}

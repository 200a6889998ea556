extension Cache: CacheLevel {
    /// A cache's keys are strings.
    public typealias Key = String

    /// Removes every value from memory and disk: ``removeAll()`` under the name a cache level uses.
    public func clear() async {
        removeAll()
    }

    /// Empties the memory level: ``clearMemory()`` under the name a cache level uses.
    public func onMemoryWarning() {
        clearMemory()
    }
}

#if DEBUG
/// In debug builds, where tests collect what `Cache.invariantViolations()` finds when each cache of
/// a test is released.
///
/// A test installs one with `CacheRegistry.$current.withValue(CacheRegistry()) { … }`. A cache
/// built in that task (or its child tasks) keeps a reference to it and, when released, checks its
/// own invariants and records any violation here. Release builds have none of this.
final class CacheRegistry: Sendable {
    /// The registry of the current task, if a test installed one.
    @TaskLocal static var current: CacheRegistry?

    private let state = Locked<(checked: Int, problems: [String])>((0, []))

    init() {}

    /// Records the result of one cache's check.
    func record(_ problems: [String]) {
        state.withLock {
            $0.checked += 1
            $0.problems += problems
        }
    }

    /// How many caches were checked, and every violation they reported.
    var results: (checked: Int, problems: [String]) { state.withLock { $0 } }
}
#endif

import Hoard

/// A delegate that writes down what the cache tells it, for the narration to print in order.
///
/// Memory evictions and clears are told before the call that caused them returns; disk evictions
/// come from the background writer, whenever it lands a file, possibly while later sets are still
/// being made. Printing either from where it arrives would race the narration, and one list of both
/// would interleave them differently from run to run. So each level gets its own stream of lines,
/// in the order of its callbacks, which the demo prints with a ``StreamPrinter``.
///
/// Hoard holds its delegate weakly: keep a strong reference yourself.
final class DelegateLog: CacheDelegate, Sendable {
    typealias Value = Article

    /// One line per memory callback (evictions, clears), in the order they were made.
    let memory: AsyncStream<String>
    /// One line per disk callback (evictions, clears), in the order they were made.
    let disk: AsyncStream<String>
    private let memoryLines: AsyncStream<String>.Continuation
    private let diskLines: AsyncStream<String>.Continuation

    init() {
        (memory, memoryLines) = AsyncStream.makeStream(of: String.self)
        (disk, diskLines) = AsyncStream.makeStream(of: String.self)
    }

    func cache(_ cache: Cache<Article>, willEvictFromMemory value: Article, forKey key: String) {
        memoryLines.yield("delegate: willEvictFromMemory  \"\(key)\" (\(value.title))")
    }

    func cache(_ cache: Cache<Article>, willEvictFromDiskForKey key: String) {
        diskLines.yield("delegate: willEvictFromDiskForKey \"\(key)\"")
    }

    func cacheWillClearMemory(_ cache: Cache<Article>) {
        memoryLines.yield("delegate: cacheWillClearMemory")
    }

    func cacheWillClearDisk(_ cache: Cache<Article>) {
        diskLines.yield("delegate: cacheWillClearDisk")
    }
}

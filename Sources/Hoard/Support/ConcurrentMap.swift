import Dispatch

extension RandomAccessCollection where Index == Int, Self: Sendable {
    /// The elements transformed on every core, in chunks of `chunkSize`, in their order.
    ///
    /// For many independent, similar system calls (one `stat` or one read per file of a folder).
    /// - Complexity: O(n) calls of `transform`, spread over `DispatchQueue.concurrentPerform`.
    func concurrentMap<T: Sendable>(chunkSize: Int = 256, _ transform: @Sendable (Element) -> T) -> [T] {
        concurrentMapChunks(chunkSize: chunkSize) { $0.map(transform) }
    }

    /// The chunks of `chunkSize` elements transformed on every core, their results joined in order.
    ///
    /// Each call of `transform` runs on one thread and may keep what it reuses (a read buffer) for
    /// the elements of its chunk.
    /// - Parameters:
    ///   - chunkSize: The elements per call of `transform`.
    ///   - transform: Returns the results of one chunk's elements, in their order.
    /// - Returns: Every chunk's results, in the chunks' order.
    /// - Complexity: O(n / chunkSize) calls of `transform`, spread over `DispatchQueue.concurrentPerform`.
    func concurrentMapChunks<T: Sendable>(chunkSize: Int = 256, _ transform: @Sendable (SubSequence) -> [T]) -> [T] {
        let chunks = (count + chunkSize - 1) / chunkSize
        guard chunks > 1 else { return transform(self[...]) }
        let results = Locked<[Int: [T]]>([:])
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let start = startIndex + chunk * chunkSize
            let mapped = transform(self[start..<Swift.min(start + chunkSize, endIndex)])
            results.withLock { $0[chunk] = mapped }
        }
        return results.withLock { results in (0..<chunks).flatMap { results[$0] ?? [] } }
    }
}

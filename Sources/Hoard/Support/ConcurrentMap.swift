import Dispatch

extension RandomAccessCollection where Index == Int, Self: Sendable {
    /// The elements transformed on every core, in chunks of `chunkSize`, in their order.
    ///
    /// For many independent, similar system calls (one `stat` or one read per file of a folder).
    /// - Complexity: O(n) calls of `transform`, spread over `DispatchQueue.concurrentPerform`.
    func concurrentMap<T: Sendable>(chunkSize: Int = 256, _ transform: @Sendable (Element) -> T) -> [T] {
        let chunks = (count + chunkSize - 1) / chunkSize
        guard chunks > 1 else { return map(transform) }
        let results = Locked<[Int: [T]]>([:])
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let start = startIndex + chunk * chunkSize
            let mapped = self[start..<Swift.min(start + chunkSize, endIndex)].map(transform)
            results.withLock { $0[chunk] = mapped }
        }
        return results.withLock { results in (0..<chunks).flatMap { results[$0] ?? [] } }
    }
}

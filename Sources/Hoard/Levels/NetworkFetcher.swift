import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A fetcher that downloads the bytes at a URL through `URLSession`.
///
/// Put it at the bottom of a composition, where it answers the misses of the levels above:
/// ```swift
/// let images = MemoryCacheLevel<URL, Data>(capacity: 100)
///     .compose(DiskCacheLevel<URL, Data>(directory: folder, capacity: 1_000, serializer: DataSerializer()))
///     .compose(NetworkFetcher())
/// ```
/// A response whose status is 400 or more is a failure: ``get(_:)`` throws ``HTTPError`` with the
/// status, so a composition treats it as a miss and stores nothing. Cancelling the task that awaits
/// ``get(_:)`` cancels the request, on Apple platforms and on Linux alike, and the get throws
/// `CancellationError` (never `URLError.cancelled`), so that compositions recognise it.
///
/// Writes, removals and clears do nothing (see ``Fetcher``). On Linux the fetcher uses
/// `FoundationNetworking`.
public struct NetworkFetcher: Fetcher, Sendable {
    /// The error ``NetworkFetcher/get(_:)`` throws when the server answers with a status of 400 or
    /// more.
    public struct HTTPError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The HTTP status of the response, such as 404.
        public let statusCode: Int
        /// The URL that was requested.
        public let url: URL

        /// Creates the error for a response.
        ///
        /// - Parameters:
        ///   - statusCode: The HTTP status of the response.
        ///   - url: The URL that was requested.
        public init(statusCode: Int, url: URL) {
            self.statusCode = statusCode
            self.url = url
        }

        /// For example `HTTP 404 for https://example.com/a.png`.
        public var description: String { "HTTP \(statusCode) for \(url.absoluteString)" }
    }

    /// The session that makes the requests.
    public let session: URLSession

    /// Creates a fetcher that uses `session`.
    ///
    /// - Parameter session: The session that makes the requests; its configuration decides the
    ///   timeouts, the headers and the HTTP cache.
    public init(session: URLSession = .shared) {
        self.session = session
    }

    /// Downloads the bytes at `key`.
    ///
    /// - Parameter key: The URL to download.
    /// - Returns: The body of the response.
    /// - Throws: ``HTTPError`` when the status is 400 or more; `CancellationError` when the calling task
    ///   is cancelled; the `URLError` of a failed request (no connection, a timeout, …).
    public func get(_ key: URL) async throws -> Data {
        let (data, response) = try await download(key)
        if let response = response as? HTTPURLResponse, response.statusCode >= 400 {
            HoardLogger.log(.debug, "The request for \(key.absoluteString) failed with HTTP \(response.statusCode).")
            throw HTTPError(statusCode: response.statusCode, url: key)
        }
        return data
    }

    /// Runs a data task for `url`, cancelling it when the calling task is cancelled.
    ///
    /// Written on `dataTask(with:completionHandler:)` rather than `data(from:)` so that cancellation
    /// behaves the same on every platform.
    private func download(_ url: URL) async throws -> (Data, URLResponse) {
        let state = Locked(DownloadState())
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: url) { data, response, error in
                    if let error {
                        let isCancelled = (error as? URLError)?.code == .cancelled
                        continuation.resume(throwing: isCancelled ? CancellationError() : error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                let isCancelled = state.withLock { state in
                    if !state.isCancelled { state.task = task }
                    return state.isCancelled
                }
                if isCancelled {
                    // The task never runs, so its completion handler is never called.
                    continuation.resume(throwing: CancellationError())
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            let task = state.withLock { state in
                state.isCancelled = true
                return state.task
            }
            task?.cancel()
        }
    }
}

/// What the cancellation handler of a download and the download itself share.
private struct DownloadState {
    var isCancelled = false
    var task: URLSessionDataTask?
}

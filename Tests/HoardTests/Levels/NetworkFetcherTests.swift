import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Tests for `NetworkFetcher`, against a real HTTP server on 127.0.0.1 that each test starts.
@Suite struct NetworkFetcherTests {
    /// A session without an HTTP cache, so that every get reaches the server.
    static func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        // A local server on a machine slowed by sanitizers can take a while; only a hang should fail.
        configuration.timeoutIntervalForRequest = 600
        return URLSession(configuration: configuration)
    }

    @Test func returnsTheBodyOfASuccessfulResponse() async throws {
        let server = try LocalHTTPServer(routes: ["/ok": .init(status: 200, body: Data("hello".utf8))])
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let fetcher = NetworkFetcher(session: session)
        #expect(try await fetcher.get(server.url("/ok")) == Data("hello".utf8))
        #expect(server.receivedPaths == ["/ok"])
    }

    @Test func aStatusOf400OrMoreThrowsTheHTTPError() async throws {
        let server = try LocalHTTPServer(routes: ["/gone": .init(status: 410)])
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let fetcher = NetworkFetcher(session: session)
        let missing = server.url("/missing")
        let error = await #expect(throws: NetworkFetcher.HTTPError.self) { try await fetcher.get(missing) }
        #expect(error == NetworkFetcher.HTTPError(statusCode: 404, url: missing))
        let gone = await #expect(throws: NetworkFetcher.HTTPError.self) {
            try await fetcher.get(server.url("/gone"))
        }
        #expect(gone?.statusCode == 410)
    }

    @Test func aRefusedConnectionThrows() async throws {
        let port = try LocalHTTPServer.closedPort()
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let fetcher = NetworkFetcher(session: session)
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/ok"))
        await #expect(throws: URLError.self) { try await fetcher.get(url) }
    }

    @Test func aFailedFetchIsAMissInAComposition() async throws {
        let server = try LocalHTTPServer(routes: ["/ok": .init(status: 200, body: Data("hello".utf8))])
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let memory = MemoryCacheLevel<URL, Data>(capacity: 4)
        let level = memory.compose(NetworkFetcher(session: session))
        #expect(try await level.get(server.url("/ok")) == Data("hello".utf8))
        #expect(try await memory.get(server.url("/ok")) == Data("hello".utf8))
        await #expect(throws: NetworkFetcher.HTTPError.self) { try await level.get(server.url("/missing")) }
        await #expect(throws: CacheError.notFound) { try await memory.get(server.url("/missing")) }
    }

    @Test func cancellingTheGetCancelsTheRequestWithoutWaitingForTheServer() async throws {
        let gate = ThreadGate()
        let server = try LocalHTTPServer(routes: ["/slow": .init(status: 200, body: Data("late".utf8), gate: gate)])
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let fetcher = NetworkFetcher(session: session)
        let url = server.url("/slow")
        let task = Task { try await fetcher.get(url) }
        // The server holds the request on the gate, which stays closed until the server stops.
        #expect(await waitUntil { server.receivedPaths == ["/slow"] })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func aGetInACancelledTaskThrowsCancellationError() async throws {
        let server = try LocalHTTPServer(routes: ["/ok": .init(status: 200)])
        let session = Self.makeSession()
        defer { session.finishTasksAndInvalidate() }
        let fetcher = NetworkFetcher(session: session)
        let url = server.url("/ok")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fetcher.get(url)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}

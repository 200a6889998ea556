import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The examples of the "Composing Levels" article (`Sources/Hoard/Hoard.docc/ComposingLevels.md`),
/// run against local levels and servers.
///
/// Between the `// README` markers, each test holds the article's code as it is printed there.
@Suite struct ReadmeExamplesTests {
    struct User: Codable, Sendable, Equatable {
        let id: Int
        var name: String
    }

    @Test func memoryOverDiskOverNetwork() async throws {
        let server = try LocalHTTPServer(routes: ["/logo.png": .init(status: 200, body: Data("PNG".utf8))])
        let temporary = TemporaryDirectory()
        let folder = temporary.container("images")
        let logoURL = server.url("/logo.png")

        // README
        let memory = MemoryCacheLevel<URL, Data>(capacity: 100)
        let disk = DiskCacheLevel<URL, Data>(directory: folder, capacity: 1_000, serializer: DataSerializer())
        let images = memory.compose(disk).compose(NetworkFetcher())

        let logo = try await images.get(logoURL)  // network, then stored on disk and in memory
        let again = try await images.get(logoURL)  // memory
        let subscription = images.listenToMemoryWarnings()  // empties `memory` when memory runs short
        // README

        #expect(logo == Data("PNG".utf8))
        #expect(again == logo)
        #expect(server.receivedPaths == ["/logo.png"])
        #expect(try await disk.get(logoURL) == logo)
        subscription.cancel()
    }

    @Test func aDomainStructAsTheKey() async throws {
        let temporary = TemporaryDirectory()
        let folder = temporary.container("users")

        // README
        struct UserID: Sendable, Hashable {
            let rawValue: Int
        }

        let disk = DiskCacheLevel<String, User>(directory: folder, capacity: 1_000)
        let users = disk.transformKeys { (id: UserID) in "user-\(id.rawValue)" }

        try await users.set(User(id: 42, name: "Ada"), forKey: UserID(rawValue: 42))
        let ada = try await users.get(UserID(rawValue: 42))  // read from the file of key "user-42"
        // README

        #expect(ada == User(id: 42, name: "Ada"))
        #expect(try await disk.get("user-42") == ada)
    }

    @Test func aTwoWayTransformerBetweenDataAndAModel() async throws {
        // README
        let json = TwoWayTransformer<Data, User>(
            transform: { data in try JSONDecoder().decode(User.self, from: data) },
            inverseTransform: { user in try JSONEncoder().encode(user) }
        )
        let bytes = MemoryCacheLevel<String, Data>(capacity: 100)
        let users = bytes.transformValues(json)

        try await users.set(User(id: 7, name: "Grace"), forKey: "7")  // stored as JSON bytes
        let grace = try await users.get("7")

        try await bytes.set(Data("not JSON".utf8), forKey: "8")
        let broken = try? await users.get("8")  // a value that does not decode is a miss
        // README

        #expect(grace == User(id: 7, name: "Grace"))
        #expect(broken == nil)
        #expect(try await json.transform(json.invert().transform(grace)) == grace)
    }

    @Test func pooling() async throws {
        // The server answers at once: whether the two gets share one request depends on timing, and
        // PoolTests checks the sharing itself; this runs the article's code as printed.
        let server = try LocalHTTPServer(routes: ["/feed": .init(status: 200, body: Data("feed".utf8))])
        let feedURL = server.url("/feed")

        // README
        let network = NetworkFetcher().pooled()

        async let first = network.get(feedURL)
        async let second = network.get(feedURL)  // shares the request of the first get
        let feeds = try await [first, second]
        // README

        #expect(feeds == [Data("feed".utf8), Data("feed".utf8)])
        #expect((1...2).contains(server.receivedPaths.count))
    }

    @Test func batches() async throws {
        // README
        let scores = MemoryCacheLevel<String, Int>(capacity: 100)
        try await scores.set(1, forKey: "a")
        try await scores.set(3, forKey: "c")

        let found = try await scores.batchGetSome(["a", "b", "c"])  // [1, 3]: misses are left out

        let all = scores.allBatch()
        try await all.set([2], forKey: ["b"])
        let every = try await all.get(["a", "b", "c"])  // [1, 2, 3], in key order
        let failed = try? await all.get(["a", "z"])  // nil: one miss fails the batch
        // README

        #expect(found == [1, 3])
        #expect(every == [1, 2, 3])
        #expect(failed == nil)
    }

    @Test func routingWithSwitchLevels() async throws {
        let temporary = TemporaryDirectory()
        let folder = temporary.container("media")

        // README
        let images = MemoryCacheLevel<URL, Data>(capacity: 100)
        let videos = DiskCacheLevel<URL, Data>(directory: folder, capacity: 100, serializer: DataSerializer())
        let media = switchLevels(images, videos) { url in
            url.pathExtension == "mp4" ? .cacheB : .cacheA
        }

        let clip = URL(string: "https://example.com/intro.mp4")!
        try await media.set(Data("movie".utf8), forKey: clip)  // goes to disk only
        // README

        #expect(try await videos.get(clip) == Data("movie".utf8))
        await #expect(throws: CacheError.notFound) { try await images.get(clip) }
    }
}

import Foundation
import Testing

@testable import Hoard

/// Errors say what happened, cause included, wherever they are printed.
@Suite struct CacheErrorMessageTests {
    @Test func theLocalizedDescriptionIsTheMessage() {
        let error: any Error = CacheError.notFound(key: "k")
        #expect(error.localizedDescription == "No value is stored for key \"k\".")
        #expect("\(error)" == "CacheError.notFound: No value is stored for key \"k\".")
    }

    @Test func anIOFailureNamesThePathTheCallAndTheSystemsReason() throws {
        let folder = TemporaryDirectory()
        let file = folder.url.appendingPathComponent("a-file")
        try Data("not a folder".utf8).write(to: file)
        let error = #expect(throws: CacheError.io) {
            try CacheBuilder<String>(serializer: StringSerializer()).containerName("c").directory(file).build()
        }
        let message = error?.localizedDescription ?? ""
        #expect(message.contains(file.path), "\(message)")
        #expect(message.contains("Not a directory") || message.contains("exists"), "\(message)")
    }

    @Test func aPOSIXCauseIsSpelledOutInTheMessage() {
        let error = CacheError.io(
            "Cannot write the entry.",
            underlying: CacheError.FileError(operation: "openat", path: "/x/y", errorNumber: EACCES)
        )
        #expect(error.message == "Cannot write the entry. openat(/x/y) failed: Permission denied (errno 13).")
    }

    @Test func aFailedJournalAppendCarriesTheWriteThatFailed() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        let disk = try #require(cache.disk)
        try await cache.save("1", forKey: "a")
        // A disk that fills up part way through the append of the next write's records.
        SharedContainer.testHooks.failNextAppend(afterBytes: 7, at: disk.directory.path)
        let error = try #require(await #expect(throws: CacheError.io) { try await cache.save("2", forKey: "b") })
        let index = disk.directory.path + "/" + ContainerFile.index
        #expect(
            error.message == "Cannot write the entry for key \"b\": the journal of \(disk.directory.path) cannot be "
                + "appended to: write(\(index)) failed: No space left on device (errno \(ENOSPC))."
        )
        #expect(error.key == "b")
        let posix = try #require(error.underlyingError as? CacheError.FileError)
        #expect(posix.operation == "write" && posix.path == index && posix.errorNumber == ENOSPC)
    }

    @Test func aChangeRefusedForAStaleViewCarriesTheCallThatFailed() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        let disk = try #require(cache.disk)
        try await cache.save("1", forKey: "a")
        let path = disk.directory.path
        SharedContainer.testHooks.setCatchUpFails(true, at: path)
        defer { SharedContainer.testHooks.setCatchUpFails(false, at: path) }
        let error = try #require(await #expect(throws: CacheError.io) { try await cache.save("2", forKey: "b") })
        let index = path + "/" + ContainerFile.index
        #expect(error.message.hasPrefix("The change for key \"b\" is not made:"), "\(error.message)")
        #expect(error.message.contains("fstatat(\(index)) failed: Too many open files (errno \(EMFILE))"))
        let posix = try #require(error.underlyingError as? CacheError.FileError)
        #expect(posix.operation == "fstatat" && posix.errorNumber == EMFILE)
    }

    @Test func noFetcherARefusedKeyAndAMissSayDifferentThings() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        let noFetcher = await #expect(throws: CacheError.notFound) { try await cache.getOrFetch(forKey: "k") }
        let level = MemoryCacheLevel<String, String>(capacity: 10)
        let refused = await #expect(throws: CacheError.notFound) {
            try await level.conditioned { _ in false }.get("k")
        }
        let missed = await #expect(throws: CacheError.notFound) { try await level.get("k") }
        let messages = [noFetcher, refused, missed].map { $0?.message ?? "" }
        #expect(messages[0].contains("no fetcher"), "\(messages[0])")
        #expect(messages[1].contains("refused"), "\(messages[1])")
        #expect(messages[2] == "No value is stored for key \"k\".")
        #expect(Set(messages).count == 3)
    }
}

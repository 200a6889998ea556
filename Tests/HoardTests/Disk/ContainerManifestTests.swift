import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A container records what it holds; a cache of another type or serializer is refused, never
/// allowed to delete every entry as undecodable.
@Suite(.timeLimit(.minutes(10))) struct ContainerManifestTests {
    private func manifest(_ folder: TemporaryDirectory) throws -> (contents: ContainerContents, version: UInt32)? {
        ContainerManifest.decode(
            try RawFiles.read(folder.container().appendingPathComponent(ContainerFile.manifest).path)
        )
    }

    @Test func aContainerRecordsItsValueTypeSerializerAndVersion() throws {
        let folder = TemporaryDirectory()
        _ = try folder.stringBuilder().version(3).build()
        let recorded = try #require(try manifest(folder))
        #expect(
            recorded.contents == ContainerContents(valueType: "Swift.String", serializerType: "Hoard.StringSerializer")
        )
        #expect(recorded.version == 3)
    }

    @Test func anotherValueTypeOrSerializerUnderTheSameVersionIsRefusedNamingBothAndTheWaysOut() async throws {
        let folder = TemporaryDirectory()
        do {
            let strings = try folder.stringBuilder().build()
            strings["k"] = "text"
            await strings.flush()
        }
        // Closed: the writer may hold the store a moment after the last cache goes.
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        let error = #expect(throws: CacheError.invalidConfiguration) { try folder.dataBuilder().build() }
        let message = error?.message ?? ""
        for part in [
            "Swift.String", "Hoard.StringSerializer", "Data", "Hoard.DataSerializer", "containerName", "version",
        ] {
            #expect(message.contains(part), "\(part) in: \(message)")
        }
        // Another serializer of the same type is refused too.
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder().serializer(PickySerializer()).build()
        }
        // The entries are untouched.
        #expect(try folder.stringBuilder().build()["k"] == "text")
    }

    @Test func bumpingTheVersionOpensItAndPurgesTheOldEntries() async throws {
        let folder = TemporaryDirectory()
        do {
            let strings = try folder.stringBuilder().build()
            strings["k"] = "text"
            await strings.flush()
        }
        // Closed: the writer may hold the store a moment after the last cache goes.
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        let data = try folder.dataBuilder().version(1).build()
        #expect(data["k"] == nil)
        await data.flush()
        #expect(data.diskCount == 0)
        #expect(try manifest(folder)?.contents.valueType.hasSuffix("Data") == true)
        #expect(try manifest(folder)?.version == 1)
        withExtendedLifetime(data) {}
    }

    @Test func aContainerWithoutAManifestAdoptsItsFirstOpenersAndADamagedOneIsReplaced() async throws {
        let folder = TemporaryDirectory()
        let path = folder.container().appendingPathComponent(ContainerFile.manifest).path
        do {
            let strings = try folder.stringBuilder().build()
            strings["k"] = "text"
            await strings.flush()
        }
        // Closed: the writer may hold the store a moment after the last cache goes.
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        try FileManager.default.removeItem(atPath: path)  // as written before containers had one
        do {
            let strings = try folder.stringBuilder().build()
            #expect(strings["k"] == "text")
        }
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        #expect(try manifest(folder)?.contents.valueType == "Swift.String")
        try RawFiles.write(Array("not a manifest".utf8), to: path)
        _ = try folder.stringBuilder().build()
        #expect(try manifest(folder)?.contents.valueType == "Swift.String")
    }

    @Test func aDiskLevelAndACacheOfOneTypeShareTheContainerAndOfAnotherTypeDoNot() async throws {
        let folder = TemporaryDirectory()
        // Both with their default policy: they must agree on it to share the store.
        let cache = try folder.stringBuilder().build()
        let same = DiskCacheLevel<String, String>(
            directory: folder.container(),
            capacity: 1_000,
            serializer: StringSerializer()
        )
        try await same.set("from the level", forKey: "k")
        #expect(cache["k"] == "from the level")
        let other = DiskCacheLevel<String, Int>(directory: folder.container(), capacity: 1_000)
        await #expect(throws: CacheError.invalidConfiguration) { try await other.get("k") }
    }

    @Test func anotherProcessOfAnotherValueTypeIsRefused() async throws {
        let folder = TemporaryDirectory()
        do {
            let strings = try folder.stringBuilder().build()
            strings["k"] = "text"
            await strings.flush()
        }
        // Closed: the writer may hold the store a moment after the last cache goes.
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        let refused = try await WorkerProcess.run(["open-data", folder.url.path, "test"])
        #expect(refused.ending == .exited(4))
        #expect(refused.lines.first?.hasPrefix("invalid The container") == true)
        #expect(refused.lines.first?.contains("Swift.String") == true)
        #expect(try folder.stringBuilder().build()["k"] == "text")
    }
}

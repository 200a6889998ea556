import Foundation
import Testing

@testable import Hoard

/// Bad builder input gets a clear answer; a memory-only cache needs no container.
@Suite struct CacheBuilderInputTests {
    @Test(arguments: [" ", "\t", "  \n "])
    func aWhiteSpaceContainerNameIsRejectedNamingTheOption(name: String) {
        let folder = TemporaryDirectory()
        let error = #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder(name).build()
        }
        #expect(error?.message.contains("containerName") == true)
        #expect(folder.allPaths().isEmpty)
    }

    @Test(arguments: [0.0, -1.0, -.infinity])
    func aNonPositiveDefaultExpiryIsRejectedNamingTheOption(seconds: Double) {
        let folder = TemporaryDirectory()
        let error = #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder().expiry(.seconds(seconds)).build()
        }
        #expect(error?.message.contains("expiry") == true)
    }

    @Test func aMemoryOnlyCacheNeedsNoContainerAndTouchesNoDisk() throws {
        let folder = TemporaryDirectory()
        let cache = try CacheBuilder<String>(serializer: StringSerializer()).directory(folder.url).maxDiskCount(0)
            .build()
        cache["k"] = "v"
        #expect(cache["k"] == "v")
        #expect(cache.diskCount == 0)
        #expect(folder.allPaths().isEmpty)
    }

    @Test func aMemoryOnlyCacheStillChecksAContainerNameItIsGiven() {
        let error = #expect(throws: CacheError.invalidConfiguration) {
            try CacheBuilder<String>(serializer: StringSerializer()).containerName("a/b").maxDiskCount(0).build()
        }
        #expect(error?.message.contains("containerName") == true)
    }
}

/// The default folder is this program's own.
@Suite struct DefaultDirectoryTests {
    @Test func theDefaultFolderIsInsideAFolderNamedForThisProgram() {
        let folder = CacheBuilder<String>.defaultDirectory
        #expect(folder.lastPathComponent == "Hoard")
        let program = folder.deletingLastPathComponent().lastPathComponent
        #expect(program == (Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName))
        #expect(!program.contains("/") && !program.isEmpty)
    }
}

/// File protection is a no-op where data protection does not exist; the cache works as without it.
@Suite struct FileProtectionTests {
    @Test(arguments: [
        FileProtectionType.none, .complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication,
    ])
    func aCacheWithAProtectionClassWorks(protection: FileProtectionType) async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fileProtection(protection).build()
        try await cache.save("v", forKey: "k")
        #expect(folder.entryFiles() == [DiskKey("k").fileName])
        #expect(cache["k"] == "v")
    }
}

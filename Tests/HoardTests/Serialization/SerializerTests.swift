import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

private struct Event: Codable, Sendable, Equatable {
    let name: String
    let date: Date
}

@Suite struct SerializerTests {
    @Test func builtInSerializersRoundTrip() throws {
        #expect(try DataSerializer().deserialize(DataSerializer().serialize(Data([0, 1, 255]))) == Data([0, 1, 255]))
        #expect(try StringSerializer().deserialize(StringSerializer().serialize("héllo 🦄")) == "héllo 🦄")
        #expect(throws: StringSerializer.InvalidUTF8.self) { try StringSerializer().deserialize(Data([0xFF, 0xFE])) }
        let event = Event(name: "launch", date: Date(timeIntervalSince1970: 1_000))
        #expect(try CodableSerializer<Event>().deserialize(CodableSerializer<Event>().serialize(event)) == event)
    }

    @Test func codableSerializerUsesTheGivenEncoderAndDecoder() throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let serializer = CodableSerializer<Event>(encoder: encoder, decoder: decoder)
        let event = Event(name: "launch", date: Date(timeIntervalSince1970: 0))
        let data = try serializer.serialize(event)
        #expect(String(decoding: data, as: UTF8.self).contains("1970-01-01T00:00:00Z"))
        #expect(try serializer.deserialize(data) == event)
        #expect(throws: (any Error).self) { try CodableSerializer<Event>().deserialize(data) }
    }

    @Test func aCodableCacheStoresJSONByDefault() async throws {
        let folder = TemporaryDirectory()
        let cache = try CacheBuilder<Event>().containerName("events").directory(folder.url).build()
        let event = Event(name: "json", date: Date(timeIntervalSince1970: 5))
        cache["e"] = event
        await cache.flush()
        cache.clearMemory()
        #expect(cache["e"] == event)
    }

    @Test func aValueTheSerializerRejectsStaysInMemoryOnlyAndHarmsNoOtherEntry() async throws {
        TestLog.install()
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try CacheBuilder<String>(serializer: PoisonSerializer()).containerName("c").directory(folder.url)
            .delegate(delegate).build()
        cache["good"] = "fine"
        cache["bad"] = "fine before"
        await cache.flush()
        cache["bad"] = "poison"
        cache["after"] = "also fine"
        await cache.flush()
        #expect(cache["bad"] == "poison")  // memory still has it
        #expect(delegate.events == [.storeFailure("bad")])
        let error = try #require(delegate.lastStoreError as? CacheError)
        #expect(error.code == .serializationFailed)
        #expect(error.key == "bad")
        #expect(error.underlyingError is PoisonSerializer.Rejected)
        // The older value on disk is gone, never served in place of the newer one.
        cache.clearMemory()
        #expect(cache["bad"] == nil)
        #expect(cache["good"] == "fine")
        #expect(cache["after"] == "also fine")
        #expect(cache.diskCount == 2)
    }

    @Test func anEntryTheSerializerCannotReadIsAMissAndIsRemoved() async throws {
        let folder = TemporaryDirectory()
        // The model changed without a version bump: same types, bytes the new code cannot read.
        let old = try folder.stringBuilder().serializer(PickySerializer()).build(sharingStore: false)
        old["k"] = "not json"
        await old.flush()
        let new = try folder.stringBuilder().serializer(PickySerializer(refusingToRead: "not json"))
            .build(sharingStore: false)
        #expect(new["k"] == nil)
        await new.flush()
        #expect(new.diskCount == 0)
    }
}

/// Refuses to decode "bad" once armed, after waiting for a gate: holds a failing reader mid-read.
private final class GatedPickyDeserializer: CacheSerializer, Sendable {
    let gate = ThreadGate()
    let waiting = Counter()

    func serialize(_ value: String) throws -> Data { Data(value.utf8) }

    func deserialize(_ data: Data) throws -> String {
        let value = String(decoding: data, as: UTF8.self)
        guard value == "bad" else { return value }
        waiting.increment()
        gate.wait()
        throw TestFailure("undecodable")
    }
}

extension SerializerTests {
    @Test func aFailedDecodeDoesNotEraseANewerSet() async throws {
        let folder = TemporaryDirectory()
        let serializer = GatedPickyDeserializer()
        let cache = try CacheBuilder<String>(serializer: serializer).containerName("c").directory(folder.url).build()
        cache["k"] = "bad"
        await cache.flush()
        cache.clearMemory()
        async let read = onPlainThread { cache["k"] }
        #expect(await waitUntil { serializer.waiting.value == 1 })
        cache["k"] = "good"
        serializer.gate.open()
        #expect(await read == nil)
        await cache.flush()
        cache.clearMemory()
        #expect(cache["k"] == "good")
        #expect(cache.diskCount == 1)
    }
}

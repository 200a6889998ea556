import Foundation
import Hoard

struct User: Codable, Sendable { let id: String; var name: String }
let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("smoke-\(getpid())")
let cache = try CacheBuilder<User>().containerName("users").directory(dir).maxRamCount(2).maxDiskCount(3)
    .fetcher { key in User(id: key, name: "fetched \(key)") }.build()
cache["1"] = User(id: "1", name: "a")
cache["2"] = User(id: "2", name: "b")
cache["3"] = User(id: "3", name: "c")
print(cache["1"]?.name ?? "nil", cache.memoryCount)
await cache.flush()
print(cache.diskCount)
let c2 = try CacheBuilder<User>().containerName("users2").directory(dir).build()
print(try await cache.getOrFetch(forKey: "9").name)
print(try await c2.getOrFetch(forKey: "9"))

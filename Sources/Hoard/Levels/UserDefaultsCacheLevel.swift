import Foundation

/// A cache level in a `UserDefaults` suite, for small values that must outlive the process.
///
/// Each value is stored as the bytes its serializer makes (JSON for `Codable` values) under the key
/// `"<namespace>:<key>"`, where any `%` or `:` in the namespace is percent-escaped, so the first
/// unescaped `:` always ends the namespace. Several levels, and other code, can share one suite:
/// no two (namespace, key) pairs give one stored key, even when one namespace starts with another
/// (`tests` and `tests.fallback`), and ``clear()`` removes only this level's keys.
///
/// `UserDefaults` compares its keys code unit by code unit, so the stored key is made of the NFC
/// form of the namespace and the key (`String.canonicalKey`): spellings that Swift's `==` treats as
/// one (`"caf\u{E9}"` and `"cafe\u{301}"`) are one key here too, as in memory, on disk and on a
/// shared level.
///
/// ```swift
/// let settings = UserDefaultsCacheLevel<String, Settings>(suiteName: "com.example.settings")
/// try await settings.set(current, forKey: "theme")
/// ```
/// Keys are any `LosslessStringConvertible` type, such as `String` or `Int`. On Linux,
/// swift-corelibs-foundation keeps a suite in `$XDG_CONFIG_HOME/<suiteName>.plist`
/// (`~/.config` by default). A suite name that `UserDefaults(suiteName:)` refuses (on Apple platforms,
/// `"NSGlobalDomain"` or the app's bundle identifier) makes ``get(_:)`` and ``set(_:forKey:)`` throw
/// ``CacheError`` with code `invalidConfiguration`.
///
/// Every operation is synchronous and safe from any thread. Values in `UserDefaults` are kept in
/// memory by Foundation, so keep them small.
public final class UserDefaultsCacheLevel<Key: LosslessStringConvertible & Sendable, Value: Sendable>: CacheLevel,
    Sendable
{
    private let defaults: Result<LockedDefaults, CacheError>
    private let prefix: String
    private let serialize: @Sendable (Value) throws -> Data
    private let deserialize: @Sendable (Data) throws -> Value

    /// Opens a level on a suite, with values turned into bytes by `serializer`.
    ///
    /// - Parameters:
    ///   - suiteName: The name of the `UserDefaults` suite.
    ///   - namespace: The prefix of the level's keys in the suite; levels sharing a suite need
    ///     different namespaces.
    ///   - serializer: Turns values into bytes and back.
    public init(suiteName: String, namespace: String = "hoard", serializer: some CacheSerializer<Value>) {
        if let defaults = UserDefaults(suiteName: suiteName) {
            self.defaults = .success(LockedDefaults(defaults))
        } else {
            let error = CacheError.invalidConfiguration(
                "UserDefaults refuses the suite name \"\(suiteName)\"; use another name."
            )
            HoardLogger.log(.error, error.message)
            self.defaults = .failure(error)
        }
        prefix = Self.escaped(namespace.canonicalKey) + ":"
        serialize = { value in try serializer.serialize(value) }
        deserialize = { data in try serializer.deserialize(data) }
    }

    /// Opens a level on a suite, with `Codable` values stored as JSON.
    ///
    /// - Parameters:
    ///   - suiteName: The name of the `UserDefaults` suite.
    ///   - namespace: The prefix of the level's keys in the suite; levels sharing a suite need
    ///     different namespaces.
    public convenience init(suiteName: String, namespace: String = "hoard") where Value: Codable {
        self.init(suiteName: suiteName, namespace: namespace, serializer: CodableSerializer<Value>())
    }

    /// Returns the value stored for a key.
    ///
    /// A stored value that the serializer cannot decode is removed and is a miss.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value.
    /// - Throws: ``CacheError/notFound`` on a miss; ``CacheError`` with code `invalidConfiguration`
    ///   when the suite is unusable.
    public func get(_ key: Key) async throws -> Value {
        let defaults = try defaults.get()
        let storedKey = storedKey(key)
        guard let data = defaults.withLock({ $0.data(forKey: storedKey) }) else {
            throw CacheError.notFound(key: key.description)
        }
        do {
            return try deserialize(data)
        } catch {
            HoardLogger.log(
                .warning,
                CacheError.deserializationFailed(key: key.description, underlying: error).message
                    + " Removing the entry."
            )
            defaults.withLock { $0.removeObject(forKey: storedKey) }
            throw CacheError.notFound(key: key.description)
        }
    }

    /// Stores a value for a key.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    /// - Throws: ``CacheError`` with code `serializationFailed`, or `invalidConfiguration` when the
    ///   suite is unusable.
    public func set(_ value: Value, forKey key: Key) async throws {
        let defaults = try defaults.get()
        let data: Data
        do {
            data = try serialize(value)
        } catch {
            throw CacheError.serializationFailed(key: key.description, underlying: error)
        }
        let storedKey = storedKey(key)
        defaults.withLock { $0.set(data, forKey: storedKey) }
    }

    /// Removes the value stored for a key.
    ///
    /// - Parameter key: The key to remove.
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the suite is unusable.
    public func removeValue(forKey key: Key) async throws {
        let defaults = try defaults.get()
        let storedKey = storedKey(key)
        defaults.withLock { $0.removeObject(forKey: storedKey) }
    }

    /// Removes every value of this level's namespace; the suite's other keys stay.
    ///
    /// - Complexity: O(n) in the number of keys in the suite.
    public func clear() async {
        guard case .success(let defaults) = defaults else { return }
        let prefix = prefix
        defaults.withLock { defaults in
            // By bytes: `hasPrefix` compares characters, and a key that starts with a combining mark
            // or a joiner (`"\u{301}"`) makes one character of it and the prefix's colon.
            for key in defaults.dictionaryRepresentation().keys where key.utf8.starts(with: prefix.utf8) {
                defaults.removeObject(forKey: key)
            }
        }
    }

    /// The name of `key` in the suite: the prefix, then the key's canonical form.
    private func storedKey(_ key: Key) -> String { prefix + key.description.canonicalKey }

    /// Does nothing: `UserDefaults` manages its own memory.
    public func onMemoryWarning() {}

    /// The namespace with `%` and `:` percent-escaped, so that it contains no `:`.
    ///
    /// Scalar by scalar: `replacingOccurrences(of:with:)` matches characters, and a colon followed by
    /// a combining mark (`":\u{301}"`) is one character that is not `":"`, so it stayed unescaped.
    static func escaped(_ namespace: String) -> String {
        var escaped = String.UnicodeScalarView()
        for scalar in namespace.unicodeScalars {
            switch scalar {
            case "%": escaped.append(contentsOf: "%25".unicodeScalars)
            case ":": escaped.append(contentsOf: "%3A".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }
}

/// A `UserDefaults` reached only while holding a lock.
///
/// `UserDefaults` is documented thread-safe on Apple platforms but is not `Sendable` in
/// swift-corelibs-foundation; the lock makes the level safe on both.
private final class LockedDefaults: @unchecked Sendable {
    // Safe because `defaults` is only reached through `withLock`, which holds `lock`.
    private let lock = Lock()
    private let defaults: UserDefaults

    init(_ defaults: UserDefaults) {
        self.defaults = defaults
    }

    func withLock<Result>(_ body: (UserDefaults) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(defaults) }
    }
}

// A key is stored by its description (canonical form): two keys that `==` makes one may be two
// here (`0.0` and `-0.0`), and two it tells apart may be one.
extension UserDefaultsCacheLevel: KeyMappingLevel {
    /// The name each key is stored under, for the adapters over the level (a batch set, pooling);
    /// `nil` for `String` keys, whose canonical form `==` already goes by.
    package var mappedKeyIdentity: (@Sendable (Key) async throws -> StoredKey?)? {
        guard Key.self != String.self else { return nil }
        return { [self] key in StoredKey(storedKey(key)) }
    }
}

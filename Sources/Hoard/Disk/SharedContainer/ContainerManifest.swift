import Foundation

/// What a container holds: the type of its values and the serializer that wrote them.
///
/// Recorded in the container's manifest with the schema version, so that a cache of another type
/// opening the container meets a clear error instead of deleting every entry as undecodable.
struct ContainerContents: Hashable, Sendable {
    /// The values' type, fully qualified (`String(reflecting:)`), as in `MyApp.User`.
    var valueType: String
    /// The serializer's type, fully qualified, as in `Hoard.CodableSerializer<MyApp.User>`.
    var serializerType: String

    /// The contents of a cache of `Value` values stored by `serializer`.
    init<Value>(_ value: Value.Type, serializer: any CacheSerializer<Value>) {
        valueType = String(reflecting: value)
        serializerType = String(reflecting: type(of: serializer))
    }

    init(valueType: String, serializerType: String) {
        self.valueType = valueType
        self.serializerType = serializerType
    }
}

/// The container's manifest, `.hoard-manifest`: what it holds, and under which schema version.
///
/// ```
/// hoard-manifest 1
/// value-type <fully qualified type>
/// serializer-type <fully qualified type>
/// version <schema version>
/// ```
/// Written atomically (a temporary file renamed into place) when a container is first opened, and
/// again when it is opened under another version. A container without one adopts its first
/// opener's; a damaged one is replaced.
enum ContainerManifest {
    static let header = "hoard-manifest 1"

    static func encode(_ contents: ContainerContents, version: UInt32) -> [UInt8] {
        let lines = [
            header, "value-type \(contents.valueType)", "serializer-type \(contents.serializerType)",
            "version \(version)",
        ]
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// The manifest's contents and version, or `nil` when the bytes are not a manifest.
    static func decode(_ bytes: [UInt8]) -> (contents: ContainerContents, version: UInt32)? {
        let text = String(decoding: bytes, as: UTF8.self)
        var fields: [String: String] = [:]
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        guard lines.first == header else { return nil }
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { return nil }
            fields[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        guard let valueType = fields["value-type"], let serializerType = fields["serializer-type"],
            let version = fields["version"].flatMap({ UInt32($0) })
        else { return nil }
        return (ContainerContents(valueType: valueType, serializerType: serializerType), version)
    }
}

extension ContainerManifest {
    /// The message of a container opened with the wrong value type or serializer.
    static func mismatch(
        at path: String,
        holds recorded: ContainerContents,
        opened contents: ContainerContents,
        version: UInt32
    ) -> String {
        "The container \(path) holds values of type \(recorded.valueType) written by "
            + "\(recorded.serializerType) under version \(version), and this cache stores \(contents.valueType) with "
            + "\(contents.serializerType): opening it would delete every entry as undecodable. Give this cache a "
            + "container of its own (containerName), or bump its version(_:) to purge the old entries."
    }
}

extension SharedContainer {
    /// Checks what the container holds against what a store will write, and records it when the
    /// container has no manifest yet (or one of another version, or a damaged one).
    ///
    /// Called while opening the store, holding none of its locks.
    ///
    /// - Parameters:
    ///   - contents: What the store's values are; `nil` for a store that does not care (tests of the
    ///     store itself): nothing is checked or recorded.
    ///   - version: The store's schema version.
    ///   - log: Receives a warning when the manifest cannot be recorded.
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the container holds another
    ///   value type or serializer under the same schema version.
    func checkManifest(_ contents: ContainerContents?, version: UInt32, log: inout DeferredLog) throws {
        guard let contents else { return }
        let recorded = (try? directory.read(ContainerFile.manifest))?.flatMap(ContainerManifest.decode)
        if let recorded, recorded.version == version {
            guard recorded.contents == contents else {
                throw CacheError.invalidConfiguration(
                    ContainerManifest.mismatch(
                        at: directory.path,
                        holds: recorded.contents,
                        opened: contents,
                        version: recorded.version
                    )
                )
            }
            return
        }
        do {
            // In a section, like every write: a kill in the middle is seen by the next opener.
            try withSection { access in
                if case .refused(let reason) = access {
                    log.add(.warning, "Cannot record what the container \(directory.path) holds: \(reason).")
                    return
                }
                try directory.writeAtomically(
                    ContainerManifest.encode(contents, version: version),
                    to: ContainerFile.manifest,
                    through: TemporaryFile.nextName()
                )
            }
        } catch {
            log.add(.warning, "Cannot record what the container \(directory.path) holds: \(error)")
        }
    }
}

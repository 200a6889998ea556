/// A small Codable value: Hoard stores it as JSON on disk without any extra code.
struct Article: Codable, Sendable, Equatable {
    let id: String
    let title: String
}

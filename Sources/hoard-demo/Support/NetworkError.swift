/// The error our pretend network throws.
struct NetworkError: Error, CustomStringConvertible {
    let attempt: Int
    var description: String { "NetworkError(attempt \(attempt): connection reset)" }
}

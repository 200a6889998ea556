/// An error the test levels throw on purpose.
struct TestFailure: Error, Equatable, Sendable {
    let name: String
    init(_ name: String = "failure") { self.name = name }
}

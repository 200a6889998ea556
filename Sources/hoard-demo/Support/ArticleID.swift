/// A domain type as a key: the composition step looks articles up by number, and `transformKeys`
/// turns each number into the `String` key the levels below store it under.
struct ArticleID: Hashable, Sendable {
    let number: Int
}

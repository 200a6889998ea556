/// Prints what an `AsyncStream` delivered, in the demo's own task, when the narration asks for it.
///
/// Hoard delivers events and some delegate callbacks from its own threads. A task that printed them
/// as they came would race the narration, so the demo subscribes before it acts, lets the stream
/// buffer, and after each action prints the elements that action caused: they come out in the order
/// they happened, between the lines that explain them, on every run. Knowing how many to wait for
/// also means no marker element is needed to tell when the stream has caught up.
struct StreamPrinter<Element: Sendable> {
    private var iterator: AsyncStream<Element>.Iterator
    private let describe: (Element) -> String

    /// Starts reading a stream; nothing is printed until ``printNext(_:)``.
    ///
    /// - Parameters:
    ///   - stream: The subscription to read; it should be made before the actions it reports.
    ///   - describe: The text printed for one element.
    init(_ stream: AsyncStream<Element>, describe: @escaping (Element) -> String) {
        iterator = stream.makeAsyncIterator()
        self.describe = describe
    }

    /// Waits for the next `count` elements and prints them, one a line.
    ///
    /// - Parameter count: How many elements the last action caused.
    mutating func printNext(_ count: Int) async {
        for _ in 0..<count {
            guard let element = await iterator.next() else {
                print("     (the stream ended)")
                return
            }
            print("     ↳ " + describe(element))
        }
    }
}

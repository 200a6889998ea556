/// Elements in the order they came: appended at the back, taken from the front, each in O(1)
/// amortised, where `Array.removeFirst()` moves every element left.
///
/// An array with a moving front: the taken slots are dropped once they are half of the array (and
/// at least 1 024), so each element is moved at most once on average. A taken element stays in its
/// slot until then.
///
/// `package`, so that HoardRedis queues with it too.
package struct FrontQueue<Element> {
    private var elements: [Element] = []
    private var front = 0

    package init() {}

    package var count: Int { elements.count - front }
    package var isEmpty: Bool { front == elements.count }
    package var first: Element? { front < elements.count ? elements[front] : nil }

    package mutating func append(_ element: Element) { elements.append(element) }

    /// Takes the element at the front, or returns `nil` when there is none.
    package mutating func popFirst() -> Element? {
        guard front < elements.count else { return nil }
        let element = elements[front]
        front += 1
        if front == elements.count {
            elements.removeAll(keepingCapacity: elements.count <= 1_024)
            front = 0
        } else if front >= 1_024 && front * 2 >= elements.count {
            elements.removeFirst(front)
            front = 0
        }
        return element
    }

    package mutating func removeAll() {
        elements = []
        front = 0
    }
}

extension FrontQueue: Sendable where Element: Sendable {}

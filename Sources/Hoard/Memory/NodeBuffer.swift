/// A growable array whose elements start on a 64-byte boundary: the storage of an eviction index's
/// nodes.
///
/// A Swift `Array` puts its first element 32 bytes into its allocation, and a large allocation
/// starts 16 bytes into a page, so the elements of a big array start 48 bytes into a memory line. A
/// 64-byte node there always spans two lines, and a cache hit, which reads one random node, pays
/// two memory misses instead of one. Here the buffer is allocated with 64-byte alignment, so an
/// element whose stride divides 64 (or is a multiple of it) never spans two lines.
///
/// It checks every index. Elements are read and written in place through addressors, so reading one
/// field of a node copies nothing else.
///
/// Unlike `Array`, it does not copy on write by itself: copies of a buffer share its elements until
/// one of them calls ``makeUnique()``, and a write through one copy before that is seen by all. A
/// write that checked uniqueness itself cost a call into the runtime, and an eviction index writes
/// 25 to 30 times per new entry; so the owner checks once per operation instead. A type that holds
/// buffers and has value semantics (`EvictionIndex`) holds a `NodeBufferOwner` beside them, calls
/// `makeUnique()` on every buffer when that token is shared, before it writes, and never lets one of
/// its buffers be copied without it. Debug builds trap on a write to a shared buffer.
@usableFromInline
struct NodeBuffer<Element> {
    /// The allocation and its bookkeeping; shared between copies until one of them calls
    /// ``makeUnique()``.
    @usableFromInline
    final class Storage {
        @exclusivity(unchecked) @usableFromInline var base: UnsafeMutablePointer<Element>
        @exclusivity(unchecked) @usableFromInline var count = 0
        @exclusivity(unchecked) @usableFromInline var capacity: Int

        /// The alignment of every allocation: one memory line on the machines Swift runs on.
        @inlinable
        static var alignment: Int { Swift.max(64, MemoryLayout<Element>.alignment) }

        @inlinable
        init(capacity: Int) {
            self.capacity = capacity
            base = Self.allocate(capacity)
        }

        @inlinable
        static func allocate(_ capacity: Int) -> UnsafeMutablePointer<Element> {
            let byteCount = Swift.max(1, capacity) * MemoryLayout<Element>.stride
            return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: alignment)
                .bindMemory(to: Element.self, capacity: Swift.max(1, capacity))
        }

        /// A copy holding the same elements, with the same capacity.
        @inlinable
        func copy() -> Storage {
            let copy = Storage(capacity: capacity)
            copy.base.initialize(from: base, count: count)
            copy.count = count
            return copy
        }

        /// Moves the elements to an allocation with room for `newCapacity`.
        @inlinable
        func grow(to newCapacity: Int) {
            let moved = Self.allocate(newCapacity)
            moved.moveInitialize(from: base, count: count)
            UnsafeMutableRawPointer(base).deallocate()
            base = moved
            capacity = newCapacity
        }

        deinit {
            base.deinitialize(count: count)
            UnsafeMutableRawPointer(base).deallocate()
        }
    }

    @usableFromInline var storage: Storage

    /// Creates an empty buffer with room for `capacity` elements before it grows.
    @inlinable
    init(capacity: Int = 0) {
        storage = Storage(capacity: capacity)
    }

    /// The number of elements.
    @inlinable
    var count: Int { storage.count }

    /// Whether the buffer has no elements.
    @inlinable
    var isEmpty: Bool { storage.count == 0 }

    /// Traps unless `index` is the index of an element.
    @inlinable @inline(__always)
    func check(_ index: Int) {
        precondition(UInt(bitPattern: index) < UInt(bitPattern: storage.count), "NodeBuffer: index out of range")
    }

    /// Gives this buffer its own storage if a copy shares it: call it before writing to a buffer that
    /// may have been copied.
    ///
    /// - Complexity: O(n) when the storage is shared, O(1) otherwise.
    @inlinable
    mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
    }

    /// Traps in debug builds if a copy shares the storage: a write now would change that copy too.
    ///
    /// Release builds check nothing (`assert`); the tests, built for debugging, run every write
    /// through it.
    @inlinable @inline(__always)
    mutating func assertUnique() {
        assert(isKnownUniquelyReferenced(&storage), "NodeBuffer: a write to a shared buffer; call makeUnique() first")
    }

    /// The element at `index`, read and written in place.
    @inlinable
    subscript(index: Int) -> Element {
        @inline(__always) unsafeAddress {
            check(index)
            return UnsafePointer(storage.base + index)
        }
        @inline(__always) unsafeMutableAddress {
            check(index)
            assertUnique()
            return storage.base + index
        }
    }

    /// Adds `element` at the end; amortised O(1).
    @inlinable
    mutating func append(_ element: Element) {
        assertUnique()
        let count = storage.count
        if count == storage.capacity { storage.grow(to: Swift.max(16, count * 2)) }
        (storage.base + count).initialize(to: element)
        storage.count = count + 1
    }

    /// Removes and returns the last element; the buffer must not be empty.
    @inlinable
    @discardableResult
    mutating func removeLast() -> Element {
        precondition(storage.count > 0, "NodeBuffer: removeLast on an empty buffer")
        assertUnique()
        storage.count -= 1
        return (storage.base + storage.count).move()
    }

    /// Writable access to the elements for a run of writes, which keeps the address and the count in
    /// registers instead of reading them from the storage again after each write.
    ///
    /// Only ``withMutableView(_:)`` makes one, and only for the length of its closure, while the
    /// buffer itself is held exclusively: nothing can append to or reallocate it while a view is
    /// alive. Every index is still checked.
    @usableFromInline
    struct MutableView {
        @usableFromInline let base: UnsafeMutablePointer<Element>
        @usableFromInline let count: Int

        @inlinable @inline(__always)
        init(base: UnsafeMutablePointer<Element>, count: Int) {
            self.base = base
            self.count = count
        }

        /// The element at `index`, read and written in place.
        @inlinable
        subscript(index: Int) -> Element {
            @inline(__always) unsafeAddress {
                precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "NodeBuffer: index out of range")
                return UnsafePointer(base + index)
            }
            @inline(__always) nonmutating unsafeMutableAddress {
                precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "NodeBuffer: index out of range")
                return base + index
            }
        }
    }

    /// Runs `body` with a view that writes to the storage.
    ///
    /// The view must not escape `body`.
    @inlinable @inline(__always)
    mutating func withMutableView<Result>(_ body: (MutableView) throws -> Result) rethrows -> Result {
        assertUnique()
        return try body(MutableView(base: storage.base, count: storage.count))
    }

    /// Exchanges the elements at `i` and `j`.
    @inlinable
    mutating func swapAt(_ i: Int, _ j: Int) {
        check(i)
        check(j)
        guard i != j else { return }
        assertUnique()
        swap(&storage.base[i], &storage.base[j])
    }

    /// Puts `element` at `index` and returns the element it replaces.
    @inlinable
    mutating func exchange(_ index: Int, with element: Element) -> Element {
        check(index)
        assertUnique()
        let old = (storage.base + index).move()
        (storage.base + index).initialize(to: element)
        return old
    }

    /// Removes every element and frees the storage.
    @inlinable
    mutating func removeAll() {
        storage = Storage(capacity: 0)
    }

    /// Makes room for `capacity` elements in all.
    @inlinable
    mutating func reserveCapacity(_ capacity: Int) {
        assertUnique()
        if storage.capacity < capacity { storage.grow(to: capacity) }
    }
}

extension NodeBuffer: RandomAccessCollection {
    @inlinable
    var startIndex: Int { 0 }

    @inlinable
    var endIndex: Int { storage.count }
}

extension NodeBuffer {
    /// Creates a buffer of `count` copies of `element`.
    @inlinable
    init(repeating element: Element, count: Int) {
        self.init(capacity: count)
        storage.base.initialize(repeating: element, count: count)
        storage.count = count
    }
}

extension NodeBuffer: ExpressibleByArrayLiteral {
    @inlinable
    init(arrayLiteral elements: Element...) {
        self.init(capacity: elements.count)
        for element in elements { append(element) }
    }
}

/// A token that a value holding `NodeBuffer`s keeps beside them, so that one uniqueness check tells
/// whether any of them is shared.
///
/// The copies of the value share its token and its buffers alike: while the value holds the only
/// reference to its token, it holds the only reference to each of its buffers, provided no buffer
/// was copied apart from the value. `isKnownUniquelyReferenced` on the token is then the one check
/// an operation needs before it writes (see `EvictionIndex.makeUnique()`).
@usableFromInline
final class NodeBufferOwner {
    @inlinable
    init() {}
}

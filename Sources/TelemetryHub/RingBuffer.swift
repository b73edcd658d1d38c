/// A growable FIFO ring buffer with power-of-two capacity: O(1) append and removal at both ends,
/// no allocation once it has reached its working size. Used for each subscriber's buffer.
@usableFromInline struct RingBuffer<Element> {
    @usableFromInline var storage: ContiguousArray<Element?> = []
    @usableFromInline var head = 0
    @usableFromInline var count = 0

    /// Storage above this many slots is released once the buffer is drained (after a burst).
    @inlinable static var retainedCapacity: Int { 1024 }

    @inlinable var isEmpty: Bool { count == 0 }

    /// Slots currently allocated (count of elements).
    @inlinable var capacity: Int { storage.count }

    @inlinable mutating func append(_ element: Element) {
        if count == storage.count {
            grow()
        }
        storage[(head &+ count) & (storage.count &- 1)] = element
        count &+= 1
    }

    @inlinable mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head].take()
        head = (head &+ 1) & (storage.count &- 1)
        count &-= 1
        if count == 0 {
            head = 0
            if storage.count > Self.retainedCapacity {
                storage = []
            }
        }
        return element
    }

    @inlinable mutating func grow() {
        let newCapacity = Swift.max(4, storage.count * 2)
        var newStorage = ContiguousArray<Element?>(repeating: nil, count: newCapacity)
        for offset in 0..<count {
            newStorage[offset] = storage[(head + offset) & (storage.count - 1)].take()
        }
        storage = newStorage
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}

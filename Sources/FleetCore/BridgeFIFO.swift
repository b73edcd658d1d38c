/// A first-in first-out queue over an array (the bridge's round-robin of vehicles): appends
/// at the end, takes from a moving head, and compacts once the taken part is half the storage.
package struct BridgeFIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    /// An empty queue.
    package init() {}

    package var isEmpty: Bool { head == storage.count }
    package var count: Int { storage.count - head }

    package mutating func append(_ element: Element) {
        storage.append(element)
    }

    package mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}

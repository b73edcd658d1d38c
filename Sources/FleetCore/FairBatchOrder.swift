/// The order in which the recorder handles one batch of messages, and what of it may be
/// acknowledged: a plain value, tested without PostgreSQL or a broker.
///
/// A batch is handled round-robin by vehicle (each vehicle's messages in the order they came):
/// a vehicle with a thousand messages in the batch and one with a single message have that one
/// written in the batch's first write, not after the thousand. The broker's acknowledgements
/// are cumulative, so a message is acknowledged only once it and every message before it in
/// the batch are written (``WrittenPrefix``).
package struct FairBatchOrder {
    /// The indices of a batch whose messages came from `vehicles` (one entry a message, in
    /// arrival order), round-robin by vehicle, vehicles in the order of their first message.
    /// O(n).
    package static func roundRobin(_ vehicles: [String]) -> [Int] {
        var queues: [[Int]] = []
        var queueOf: [String: Int] = [:]
        for (index, vehicle) in vehicles.enumerated() {
            if let queue = queueOf[vehicle] {
                queues[queue].append(index)
            } else {
                queueOf[vehicle] = queues.count
                queues.append([index])
            }
        }
        var order: [Int] = []
        order.reserveCapacity(vehicles.count)
        var positions = Array(repeating: 0, count: queues.count)
        var open = Array(queues.indices)
        while !open.isEmpty {
            var stillOpen: [Int] = []
            stillOpen.reserveCapacity(open.count)
            for queue in open {
                order.append(queues[queue][positions[queue]])
                positions[queue] += 1
                if positions[queue] < queues[queue].count { stillOpen.append(queue) }
            }
            open = stillOpen
        }
        return order
    }
}

/// Which messages of a batch, written in any order, form a written prefix: the longest run
/// from the batch's first message whose every message is written.
package struct WrittenPrefix {
    private var written: [Bool]
    private var end = 0

    /// A batch of `count` messages, none written.
    package init(count: Int) {
        written = Array(repeating: false, count: count)
    }

    /// Marks the messages at `indices` written; returns the index of the last message of the
    /// written prefix when it grew (acknowledge through it), else `nil`.
    package mutating func markWritten(_ indices: [Int]) -> Int? {
        for index in indices where written.indices.contains(index) { written[index] = true }
        let before = end
        while end < written.count, written[end] { end += 1 }
        return end > before ? end - 1 : nil
    }
}

import MQTT

/// Counts the fixes a subscription receives, as a user checking an upload would: live
/// (non-retained) messages, the distinct `seq` values among them (a duplicate or a message
/// without `seq` is not a new fix), and the monotonic instant the last new fix arrived.
struct FixCounter: Sendable {
    /// Live messages received.
    var messages = 0
    /// Distinct `seq` values received.
    var distinct = 0
    /// When the last new fix arrived.
    var lastArrival: ContinuousClock.Instant?

    /// Iterates `subscription` until `expected` distinct fixes have arrived, the subscription
    /// ends, or the task is cancelled.
    static func count(_ subscription: MQTTSubscription, expected: Int) async -> FixCounter {
        var result = FixCounter()
        var seen = Set<UInt64>(minimumCapacity: expected)
        let clock = ContinuousClock()
        do {
            for try await message in subscription where !message.retain {
                result.messages += 1
                guard let seq = sequenceNumber(in: message.payload), seen.insert(seq).inserted else { continue }
                result.distinct += 1
                result.lastArrival = clock.now
                if result.distinct >= expected { break }
            }
        } catch {
            // The subscription failed (the client shut down): report what arrived.
        }
        return result
    }

    /// The number after `"seq":` (an optional space allowed, as Python's `json.dumps` writes).
    static func sequenceNumber(in payload: [UInt8]) -> UInt64? {
        let key = Array(#""seq":"#.utf8)
        guard payload.count > key.count else { return nil }
        var i = 0
        while i + key.count <= payload.count {
            if payload[i] == key[0] && payload[i..<(i + key.count)].elementsEqual(key) {
                var j = i + key.count
                while j < payload.count && payload[j] == UInt8(ascii: " ") { j += 1 }
                var value: UInt64 = 0
                var digits = 0
                while j < payload.count, payload[j] >= UInt8(ascii: "0"), payload[j] <= UInt8(ascii: "9"), digits < 19 {
                    value = value * 10 + UInt64(payload[j] - UInt8(ascii: "0"))
                    digits += 1
                    j += 1
                }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }
}

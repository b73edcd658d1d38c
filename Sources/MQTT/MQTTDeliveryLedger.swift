/// The deliveries of a client that acknowledges after handling
/// (``MQTTAcknowledgement/afterHandling``): which messages the consumer has been given and
/// which it has said it handled, and so whether the network loop may write (the writes carry
/// the acknowledgements of everything received so far).
///
/// A plain value, kept under the client's lock; the loop thread, the message callback and the
/// consumer's ``MQTTClient/acknowledge(through:)`` each take one step.
struct MQTTDeliveryLedger: Sendable, Equatable {
    /// The tag of the last message delivered (tags count up from 1 in delivery order).
    private(set) var lastDelivered: UInt64 = 0
    /// The tag of the last message handed to a consumer: the one the loop waits for.
    private(set) var lastHandedOver: UInt64 = 0
    /// Every message up to this tag is handled.
    private(set) var handledThrough: UInt64 = 0
    /// A message arrived that no consumer took since the loop last looked: it must never be
    /// acknowledged, so the connection is closed before anything more is written.
    private(set) var orphaned = false

    /// A message arrived: its tag. `handedOver` is false when no consumer takes it (no
    /// stream open for it): nobody will handle it, so the loop must not acknowledge it
    /// (``takeOrphaned()``), and does not wait for it.
    mutating func deliver(handedOver: Bool) -> UInt64 {
        lastDelivered &+= 1
        if handedOver { lastHandedOver = lastDelivered } else { orphaned = true }
        return lastDelivered
    }

    /// Whether a message arrived that no consumer took (and forgets it): the loop then drops
    /// the connection unwritten, and the broker sends the message again after the reconnect.
    mutating func takeOrphaned() -> Bool {
        defer { orphaned = false }
        return orphaned
    }

    /// The consumer handled every message up to `tag`; returns whether that lets the loop
    /// write (it was waiting and now need not). A tag already acknowledged, or one never
    /// delivered, changes nothing.
    mutating func acknowledge(through tag: UInt64) -> Bool {
        let wasSettled = isSettled
        handledThrough = max(handledThrough, min(tag, lastDelivered))
        return !wasSettled && isSettled
    }

    /// A SUBSCRIBE is queued and not yet written: the loop reads nothing until it is. What a
    /// persistent session redelivers would otherwise be read first, leave the loop unsettled,
    /// and keep the SUBSCRIBE (behind the acknowledgements) from ever being written, while
    /// `subscribe()` waits for its SUBACK before the consumer starts.
    private(set) var subscribeQueued = false

    /// `subscribe()` is about to queue a SUBSCRIBE.
    mutating func queueSubscribe() { subscribeQueued = true }

    /// The loop wrote everything queued.
    mutating func wroteQueue() { subscribeQueued = false }

    /// Whether every message handed to a consumer is handled: the acknowledgements of all
    /// that was received may go to the broker.
    var isSettled: Bool { handledThrough >= lastHandedOver }

    /// Messages handed over and not yet handled.
    var outstanding: UInt64 { lastHandedOver > handledThrough ? lastHandedOver - handledThrough : 0 }
}

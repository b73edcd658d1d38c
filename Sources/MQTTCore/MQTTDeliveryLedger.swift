/// The deliveries of a client that acknowledges after handling
/// (``MQTTAcknowledgement/afterHandling``): which messages the consumer has been given and
/// which it has said it handled, and so whether the network loop may write (the writes carry
/// the acknowledgements of everything received so far) and whether it may read on.
///
/// A plain value, kept under the client's lock; the loop thread, the message callback and the
/// consumer's ``MQTTClient/acknowledge(through:)`` each take one step.
package struct MQTTDeliveryLedger: Sendable, Equatable {
    /// An empty ledger: nothing delivered yet.
    package init() {}

    /// The tag of the last message delivered (tags count up from 1 in delivery order).
    private(set) var lastDelivered: UInt64 = 0
    /// The tag of the last message handed to a consumer: the one the loop waits for.
    private(set) var lastHandedOver: UInt64 = 0
    /// Every message up to this tag is handled.
    package private(set) var handledThrough: UInt64 = 0
    /// A message arrived that must never be acknowledged (no stream was open for it, or its
    /// stream did not take it) since the loop last looked: the connection is closed before
    /// anything more is written.
    private(set) var orphaned = false
    /// `subscribe()` calls between registering their stream and queueing their last SUBSCRIBE.
    private(set) var subscribing = 0
    /// A SUBSCRIBE is queued and not yet written: the loop reads nothing until it is. What a
    /// persistent session redelivers would otherwise be read first, leave the loop unsettled,
    /// and keep the SUBSCRIBE (behind the acknowledgements) from ever being written, while
    /// `subscribe()` waits for its SUBACK before the consumer starts.
    private(set) var subscribeUnwritten = false
    /// When the ledger last went from settled to unsettled (nil while settled).
    private(set) var unsettledSince: ContinuousClock.Instant?
    /// The payload sizes of the messages handed over and not yet handled, oldest first, from
    /// `heldStart` on (a queue in an array: the handled front is dropped in bulk).
    private var held: [Held] = []
    private var heldStart = 0
    /// The payload bytes of the messages handed over and not yet handled.
    package private(set) var outstandingBytes = 0

    /// A message handed over and not yet handled: its tag and payload size.
    private struct Held: Equatable {
        var tag: UInt64
        var bytes: Int
    }

    /// What became of a delivered message.
    package enum Delivery {
        /// Handed to a consumer, which will acknowledge it.
        case handedOver
        /// No stream asked for it although streams are open (a filter a persistent session
        /// kept from an earlier run): handled by being let go, acknowledged with the rest.
        case unwanted
        /// It must not be acknowledged: nobody could take it (no stream open, or the stream
        /// refused it). The loop drops the connection unwritten; the broker sends it again.
        case orphaned
    }

    /// A message of `bytes` payload bytes arrived (`what` became of it): its tag.
    package mutating func deliver(_ what: Delivery, bytes: Int = 0, at now: ContinuousClock.Instant) -> UInt64 {
        lastDelivered &+= 1
        switch what {
        case .handedOver:
            if isSettled { unsettledSince = now }
            lastHandedOver = lastDelivered
            held.append(Held(tag: lastDelivered, bytes: bytes))
            outstandingBytes += bytes
        case .unwanted: break
        case .orphaned: orphaned = true
        }
        return lastDelivered
    }

    /// A message already tagged as handed over was not taken by its stream after all.
    package mutating func refused() { orphaned = true }

    /// Whether a message arrived that must not be acknowledged (and forgets it): the loop then
    /// drops the connection unwritten, and the broker sends it again after the reconnect.
    package mutating func takeOrphaned() -> Bool {
        defer { orphaned = false }
        return orphaned
    }

    /// The consumer handled every message up to `tag`; returns whether that lets the loop
    /// write (it was waiting and now need not). A tag already acknowledged, or one never
    /// delivered, changes nothing.
    package mutating func acknowledge(through tag: UInt64) -> Bool {
        let wasSettled = isSettled
        handledThrough = max(handledThrough, min(tag, lastDelivered))
        if isSettled { unsettledSince = nil }
        while heldStart < held.count, held[heldStart].tag <= handledThrough {
            outstandingBytes -= held[heldStart].bytes
            heldStart += 1
        }
        if heldStart == held.count {
            held.removeAll(keepingCapacity: true)
            heldStart = 0
        } else if heldStart > 1_024, heldStart * 2 > held.count {
            held.removeFirst(heldStart)
            heldStart = 0
        }
        return !wasSettled && isSettled
    }

    /// `subscribe()` begins: from now until its SUBSCRIBEs are written, nothing is read.
    package mutating func beginSubscribe() {
        subscribing += 1
        subscribeUnwritten = true
    }

    /// `subscribe()` has queued its SUBSCRIBEs (or given up).
    package mutating func endSubscribe() { subscribing = max(0, subscribing - 1) }

    /// The loop's out-queue is empty: every SUBSCRIBE queued is written, unless a `subscribe()`
    /// is still queueing.
    package mutating func queueEmptied() {
        if subscribing == 0 { subscribeUnwritten = false }
    }

    /// Whether every message handed to a consumer is handled: the acknowledgements of all
    /// that was received may go to the broker.
    package var isSettled: Bool { handledThrough >= lastHandedOver }

    /// Messages handed over and not yet handled.
    package var outstanding: UInt64 { lastHandedOver > handledThrough ? lastHandedOver - handledThrough : 0 }

    /// Whether the loop may read at `now`: not while a SUBSCRIBE waits to be written, not
    /// once the consumer has been behind for longer than `patience` (it catches up, the
    /// acknowledgements and keep-alive go out, then reading goes on), and not while it holds
    /// `budget` payload bytes or more not yet handled (what it holds stays bounded whatever the
    /// messages carry) — unless `awaitingReply` (a `subscribe()` waits for a SUBACK behind what
    /// the broker sends).
    package func mayRead(at now: ContinuousClock.Instant, patience: Duration, awaitingReply: Bool, budget: Int? = nil) -> Bool {
        guard !subscribeUnwritten else { return false }
        guard let since = unsettledSince, !awaitingReply else { return true }
        if let budget, outstandingBytes >= budget { return false }
        return since.duration(to: now) < patience
    }
}

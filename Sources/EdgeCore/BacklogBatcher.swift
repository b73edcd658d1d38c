import FleetProtocol
import OutboxCore

/// How the drain packs stored records into one `backlog` or `batch` message: the backlog's JSON
/// layout, or (batched, `uplink.encoding: compact`) the compact one. A plain value: records in,
/// one payload and the `seq`s it carries out.
package struct BacklogBatcher: Sendable {
    /// The vehicle the records are about.
    package let vehicle: VehicleID
    /// Whether batches are written in the compact encoding.
    package let compact: Bool

    /// A batcher for `vehicle`'s records, compact or JSON.
    package init(vehicle: VehicleID, compact: Bool) {
        (self.vehicle, self.compact) = (vehicle, compact)
    }

    /// The records as one backlog (or batch) payload, as many as fit in `maximumBytes`, and
    /// their `seq`s; `nil` when not even the first fits. Compact, a batch holds one numbering
    /// run (a new run begins a new batch), and a record that cannot be read back (not one of
    /// ours) goes in a JSON batch of its own.
    package func batch(
        _ records: [OutboxRecord], maximumBytes: Int = FleetPayload.maximumBacklogBytes - 256
    ) -> (seqs: [UInt64], payload: [UInt8])? {
        if compact, let batch = compactBatch(records, maximumBytes: maximumBytes) { return batch }
        var writer = FleetPayload.BacklogWriter(vehicle: vehicle, maximumBytes: maximumBytes)
        var seqs: [UInt64] = []
        for record in records {
            guard writer.append(kind: record.kind == .fix ? .fix : .heading, payload: record.payload) else { break }
            seqs.append(record.seq)
        }
        return seqs.isEmpty ? nil : (seqs, writer.finish())
    }

    private func compactBatch(_ records: [OutboxRecord], maximumBytes: Int) -> (seqs: [UInt64], payload: [UInt8])? {
        var writer: FleetPayload.CompactBatchWriter?
        var seqs: [UInt64] = []
        for record in records {
            let event: FleetPayload.BacklogEvent
            do {
                event =
                    record.kind == .fix
                    ? .fix(try FleetPayload.decodeFix(record.payload, vehicle: vehicle))
                    : .heading(try FleetPayload.decodeHeading(record.payload, vehicle: vehicle))
            } catch {
                break
            }
            let run = event.number?.run ?? 0
            if writer == nil { writer = FleetPayload.CompactBatchWriter(vehicle: vehicle, run: run, maximumBytes: maximumBytes) }
            guard writer?.run == run else { break }
            let appended: Bool
            switch event {
            case .fix(let decoded): appended = writer?.append(decoded.fix, seq: record.seq) ?? false
            case .heading(let decoded): appended = writer?.append(decoded.heading, seq: record.seq) ?? false
            }
            guard appended else { break }
            seqs.append(record.seq)
        }
        guard let writer, !seqs.isEmpty else { return nil }
        return (seqs, writer.finish())
    }

    /// Batched mode's hold: how much longer a batch that is not full waits for company (until
    /// its oldest record is `window` old), and the flush generation that ends the wait sooner
    /// (as does a full batch in the store); `nil`: send it now (not batched, full, old enough,
    /// flushed, or the store cannot be written: nothing is held in memory).
    ///
    /// The age is taken on the monotonic clock from when the drain first saw the oldest record
    /// (`firstSeen`, kept by the drain and updated here), which is within a sync interval of its
    /// intake; the wall clock (`wallMilliseconds`) only shortens the wait, for records stored
    /// before this run. A wall clock set back (a board without a battery-backed clock,
    /// corrected by NTP after boot) never holds a batch longer than the window.
    package static func hold(
        _ records: [OutboxRecord], limit: Int, maximumBytes: Int, window: Duration?, outbox: HoldView,
        firstSeen: inout (seq: UInt64, at: ContinuousClock.Instant)?, now: ContinuousClock.Instant, wallMilliseconds: Int64
    ) -> (left: Duration, flushGeneration: UInt64)? {
        guard let window, let oldest = records.first else { return nil }
        let bytes = records.reduce(0) { $0 + $1.payload.count }
        let largest = records.map(\.payload.count).max() ?? 0
        // (What the store holds counts too: the wait ends when it reaches a batch.)
        let full = records.count >= limit || outbox.inStore >= limit || bytes + largest > maximumBytes
        guard !full, !outbox.storeFailing, oldest.seq >= outbox.flushBelow else { return nil }
        if firstSeen?.seq != oldest.seq { firstSeen = (oldest.seq, now) }
        let seen = firstSeen?.at ?? now
        // A damaged store's time must not trap the subtraction.
        let (age, overflow) = wallMilliseconds.subtractingReportingOverflow(oldest.storedAtMilliseconds)
        let stored = overflow ? window : Duration.milliseconds(age)
        let left = min(window - seen.duration(to: now), window - stored)
        return left > .zero ? (left, outbox.flushGeneration) : nil
    }

    /// What ``hold(_:limit:maximumBytes:window:outbox:firstSeen:now:wallMilliseconds:)`` reads of
    /// the outbox, taken in one reading.
    package struct HoldView: Sendable {
        /// Records below this `seq` are flushed: they go now.
        package var flushBelow: UInt64
        /// The flush generation a wait ends at.
        package var flushGeneration: UInt64
        /// The store cannot be written now.
        package var storeFailing: Bool
        /// Records waiting in the store.
        package var inStore: Int

        /// One reading of the outbox.
        package init(flushBelow: UInt64, flushGeneration: UInt64, storeFailing: Bool, inStore: Int) {
            (self.flushBelow, self.flushGeneration, self.storeFailing, self.inStore) =
                (flushBelow, flushGeneration, storeFailing, inStore)
        }
    }
}

import EdgeOutbox
import FleetProtocol
import FleetcastCore
import MQTT

// The backlog loop: what could not go live (or, batched, everything) read from the store oldest
// first and sent in full batches, paced by the drain rate.
extension Publisher {
    /// Where the drain sends: `…/backlog` (not retained), or in batched mode `…/batch`
    /// (retained: a new subscriber gets the newest position with the last batch).
    var drainTopic: (topic: String, retain: Bool) {
        settings.uplinkBatch == nil
            ? (settings.topics.backlog(settings.vehicle), false) : (settings.topics.batch(settings.vehicle), true)
    }

    func backlogLoop() async {
        // Events per batch at most: a second's worth of the drain rate (the bucket's burst);
        // a compact batch holds up to the contract's 2,048 (a minute at 10 Hz is one message),
        // and the bucket lets one through at once while keeping the drain's average rate.
        let fullBatch = compactBatches ? FleetPayload.maximumBacklogEvents : max(1, settings.drainRate)
        var bucket = TokenBucket(
            rate: Double(settings.drainRate), burst: Double(max(settings.drainRate, fullBatch)), now: .now)
        let (topic, retain) = drainTopic
        // Payload bytes per batch; halved when the broker says a batch is too large for it.
        var byteBudget = FleetPayload.maximumBacklogBytes - 256
        // Batched mode: the oldest record waiting for its batch, and when the drain first saw it.
        var firstSeen: (seq: UInt64, at: ContinuousClock.Instant)?
        while !Task.isCancelled {
            // Closed: the backlog stays in the store for the next run. (Going on would spin:
            // every wait for the backlog condition holds once closed.)
            guard
                let request = outbox.transition({ state -> (Outbox.State.BacklogRequest?, Outbox.State.Resumptions) in
                    (state.closed ? nil : state.backlogRequest(), .init())
                })
            else { return }
            // A full batch every time, paced by waiting for its tokens below: reading only what
            // the bucket holds would, once a burst is spent, send a message per event or two
            // (each with its own TLS record, TCP segments and acknowledgement on the link).
            let limit = min(fullBatch, FleetPayload.maximumBacklogEvents)
            // The stored JSON of a compact batch's events is far larger than the batch: its
            // writer applies the byte budget.
            let maximumBytes = compactBatches ? Int.max : byteBudget
            var records: [OutboxRecord]
            do {
                records = try await readBacklog(request, limit: limit, maximumBytes: maximumBytes)
            } catch {
                if Task.isCancelled { return }
                logger.debug("cannot read the backlog", metadata: ["error": "\(error)"])
                await outbox.wait(for: .backlog(after: request.generation), upTo: settings.syncInterval)
                continue
            }
            if records.isEmpty {
                await outbox.wait(for: .backlog(after: request.generation))
                continue
            }
            if let wait = batchWait(records, limit: limit, maximumBytes: maximumBytes, firstSeen: &firstSeen) {
                await outbox.wait(for: .batchReady(flushAfter: wait.flushGeneration, stored: limit), upTo: wait.left)
                continue
            }
            guard let (batch, payload) = makeBatch(records, maximumBytes: byteBudget) else {
                // A record too large for any batch (not one of ours): skip it, counted as sent.
                let skipped = records[0].seq
                outbox.transition { state in
                    state.backlogSending([skipped])
                    return state.backlogAcknowledged()
                }
                continue
            }
            let wait = bucket.take(batch.count, at: .now)
            if wait > .zero {
                try? await Task.sleep(for: wait)
                if Task.isCancelled { return }
            }
            outbox.transition { [batch] state -> Outbox.State.Resumptions in
                state.backlogSending(batch)
                return .init()
            }
            do {
                try await sender.send(topic: topic, payload: payload, qos: Self.statusQoS, retain: retain)
                outbox.transition { $0.backlogAcknowledged() }
                noteSuccess(count: UInt64(batch.count), statuses: 0, backlog: UInt64(batch.count))
            } catch let error as MQTTError where error.isPacketTooLarge && batch.count > 1 {
                // The broker's maximum packet size is smaller than a batch: smaller batches.
                outbox.transition { $0.backlogFailed() }
                byteBudget = max(512, byteBudget / 2)
                logger.debug(
                    "backlog batch too large for the broker; sending smaller ones",
                    metadata: [
                        "outbox.batchBytes": "\(byteBudget)"
                    ])
            } catch let error as MQTTError where error.isPacketTooLarge {
                // One event larger than the broker takes: it can never be sent.
                outbox.transition { $0.backlogRejected() }
                noteRefusal(error, topic: topic)
            } catch let error as MQTTError where error.isPermanentPublishRefusal {
                // The backlog topic itself is refused (an ACL written without it): the records
                // stay in the store, and the drain waits (5 min, or a new connection) rather
                // than deleting days of history.
                outbox.transition { $0.backlogFailed() }
                noteRefusal(error, topic: topic)
                await backOff(state.withLock { $0.refusedBacklogRetryWait() })
            } catch {
                outbox.transition { $0.backlogFailed() }
                noteFailure(error, topic: topic)
                await backOff(state.withLock { $0.retryWait(.backlog) })
            }
        }
    }

    /// The backlog records `request` asks for, from the store, or while the store cannot be
    /// written (a full disk) from what waits in memory.
    func readBacklog(_ request: Outbox.State.BacklogRequest, limit: Int, maximumBytes: Int) async throws -> [OutboxRecord] {
        let records = try await outbox.storage.backlog(
            after: request.after, limit: limit, maximumBytes: maximumBytes, excluding: request.excluding)
        guard records.isEmpty else { return records }
        return outbox.read {
            $0.unwrittenBacklog(after: request.after, limit: limit, maximumBytes: maximumBytes, excluding: request.excluding)
        }
    }

    /// Batches are written in the compact encoding.
    var compactBatches: Bool { settings.uplinkBatch != nil && settings.uplinkEncoding == .compact }

    /// In batched mode, how much longer a batch that is not full waits for company (until its
    /// oldest record is ``Settings/uplinkBatch`` old), and the flush generation that ends the
    /// wait sooner (as does a full batch in the store); `nil`: send it now (not batched, full,
    /// old enough, flushed, or the store cannot be written: nothing is held in memory).
    ///
    /// The age is taken on the monotonic clock from when the drain first saw the oldest record
    /// (`firstSeen`, kept by the drain), which is within a sync interval of its intake; the
    /// wall clock only shortens the wait, for records stored before this run. A wall clock
    /// set back (a board without a battery-backed clock, corrected by NTP after boot) never
    /// holds a batch longer than the window.
    func batchWait(
        _ records: [OutboxRecord], limit: Int, maximumBytes: Int, firstSeen: inout (seq: UInt64, at: ContinuousClock.Instant)?
    ) -> (left: Duration, flushGeneration: UInt64)? {
        guard let window = settings.uplinkBatch, let oldest = records.first else { return nil }
        let (flushBelow, flushGeneration, failing, inStore) = outbox.read {
            ($0.flushBelow, $0.flushGeneration, $0.storageProblem != nil, $0.storedPending)
        }
        let bytes = records.reduce(0) { $0 + $1.payload.count }
        let largest = records.map(\.payload.count).max() ?? 0
        // (What the store holds counts too: the wait below ends when it reaches a batch.)
        let full = records.count >= limit || inStore >= limit || bytes + largest > maximumBytes
        guard !full, !failing, oldest.seq >= flushBelow else { return nil }
        let clock = ContinuousClock.now
        if firstSeen?.seq != oldest.seq { firstSeen = (oldest.seq, clock) }
        let seen = firstSeen?.at ?? clock
        // A damaged store's time must not trap the subtraction.
        let (age, overflow) = now().millisecondsSince1970.subtractingReportingOverflow(oldest.storedAtMilliseconds)
        let stored = overflow ? window : Duration.milliseconds(age)
        let left = min(window - seen.duration(to: clock), window - stored)
        return left > .zero ? (left, flushGeneration) : nil
    }

    /// The records as one backlog (or batch) payload, as many as fit, and their `seq`s; `nil`
    /// when not even the first fits. Batched with the compact encoding, a batch holds one
    /// numbering run (a new run begins a new batch).
    func makeBatch(
        _ records: [OutboxRecord], maximumBytes: Int = FleetPayload.maximumBacklogBytes - 256
    ) -> (seqs: [UInt64], payload: [UInt8])? {
        if compactBatches, let compact = makeCompactBatch(records, maximumBytes: maximumBytes) { return compact }
        var writer = FleetPayload.BacklogWriter(vehicle: settings.vehicle, maximumBytes: maximumBytes)
        var batch: [UInt64] = []
        for record in records {
            guard writer.append(kind: record.kind == .fix ? .fix : .heading, payload: record.payload) else { break }
            batch.append(record.seq)
        }
        return batch.isEmpty ? nil : (batch, writer.finish())
    }

    /// The records as one compact batch (``FleetPayload/CompactBatchWriter``); `nil` when the
    /// first cannot be read back (not one of ours: it goes in a JSON batch of its own).
    private func makeCompactBatch(_ records: [OutboxRecord], maximumBytes: Int) -> (seqs: [UInt64], payload: [UInt8])? {
        var writer: FleetPayload.CompactBatchWriter?
        var batch: [UInt64] = []
        for record in records {
            let vehicle = settings.vehicle
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
            batch.append(record.seq)
        }
        guard let writer, !batch.isEmpty else { return nil }
        return (batch, writer.finish())
    }

    /// A clean stop over a working link sends what the drain had not sent yet (batched: what
    /// was gathered; live: what was superseded or demoted in the last moments, or a backlog
    /// still draining), as full batches, until `deadline`, rather than leaving it in the store
    /// until the next start. What does not go in time stays there.
    func sendRemainingBacklog(until deadline: ContinuousClock.Instant) async {
        guard ContinuousClock.now < deadline else { return }
        await commit(clean: false)  // what was accepted since the last sync
        let (topic, retain) = drainTopic
        while ContinuousClock.now < deadline {
            guard let request = outbox.transition({ ($0.backlogRequest(), Outbox.State.Resumptions()) }),
                let records = try? await readBacklog(
                    request, limit: FleetPayload.maximumBacklogEvents,
                    maximumBytes: compactBatches ? Int.max : FleetPayload.maximumBacklogBytes - 256),
                let (batch, payload) = makeBatch(records)
            else { return }
            outbox.transition { [batch] state -> Outbox.State.Resumptions in
                state.backlogSending(batch)
                return .init()
            }
            let sender = self.sender
            let sent =
                await withTimeLimit(deadline - ContinuousClock.now) {
                    (try? await sender.send(topic: topic, payload: payload, qos: Self.statusQoS, retain: retain)) != nil
                } ?? false
            outbox.transition { sent ? $0.backlogAcknowledged() : $0.backlogFailed() }
            guard sent else { return }
            noteSuccess(count: UInt64(batch.count), statuses: 0, backlog: UInt64(batch.count))
        }
    }
}

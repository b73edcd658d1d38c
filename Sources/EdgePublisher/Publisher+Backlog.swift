import EdgeCore
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
        let fullBatch = batcher.compact ? FleetPayload.maximumBacklogEvents : max(1, settings.drainRate)
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
            let maximumBytes = batcher.compact ? Int.max : byteBudget
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
            guard let (batch, payload) = batcher.batch(records, maximumBytes: byteBudget) else {
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

    /// In batched mode, how much longer a batch that is not full waits for company
    /// (``EdgeCore/BacklogBatcher/hold(_:limit:maximumBytes:window:outbox:firstSeen:now:wallMilliseconds:)``).
    func batchWait(
        _ records: [OutboxRecord], limit: Int, maximumBytes: Int, firstSeen: inout (seq: UInt64, at: ContinuousClock.Instant)?
    ) -> (left: Duration, flushGeneration: UInt64)? {
        guard settings.uplinkBatch != nil else { return nil }
        let view = outbox.read {
            BacklogBatcher.HoldView(
                flushBelow: $0.flushBelow, flushGeneration: $0.flushGeneration, storeFailing: $0.storageProblem != nil,
                inStore: $0.storedPending)
        }
        return BacklogBatcher.hold(
            records, limit: limit, maximumBytes: maximumBytes, window: settings.uplinkBatch, outbox: view,
            firstSeen: &firstSeen, now: .now, wallMilliseconds: now().millisecondsSince1970)
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
                    maximumBytes: batcher.compact ? Int.max : FleetPayload.maximumBacklogBytes - 256),
                let (batch, payload) = batcher.batch(records)
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

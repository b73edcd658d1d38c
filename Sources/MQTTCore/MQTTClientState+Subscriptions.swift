import FleetcastCore

// The client state's publish and subscription transitions (see ``MQTTClientState``).
extension MQTTClientState {
    // MARK: publish

    /// A publish is about to be handed to libmosquitto: refused unless connected or
    /// reconnecting; otherwise the connection epoch it is sent on and the token of its wait.
    @_specialize(
        exported:true,where
            Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
            Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
    )
    package mutating func beginPublish() -> Result<(epoch: UInt64, token: UInt64), MQTTError> {
        if let refusal { return .failure(refusal) }
        publishesSinceTurn &+= 1
        return .success((epoch, makeID()))
    }

    /// Whether the loop's next turn is worth corking the socket for (see
    /// `MQTTConnectionLoop.corked`): more than one publish handed over since the last turn; more
    /// than one awaiting its acknowledgement (each PUBACK read lets libmosquitto write the next
    /// queued message in the same turn: a resend after a reconnect, a replay's window; measured
    /// on a replay at full speed, corking these turns too costs less CPU than it saves); or a
    /// subscriber, whose turn writes the acknowledgements of what it reads. A lone publish, a
    /// live fix at 1 Hz, gains nothing from it and would pay two system calls. Starts the count
    /// of the next turn.
    @_specialize(
        exported:true,where
            Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
            Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
    )
    package mutating func takeTurnCork() -> Bool {
        defer { publishesSinceTurn = 0 }
        return publishesSinceTurn >= 2 || pendingPublishes.count >= 2 || !subscriptions.isEmpty
    }

    /// Registers the wait of a publish libmosquitto accepted with `mid`, unless its
    /// acknowledgement has already arrived (then it completes at once with that outcome).
    ///
    /// `cancelled` is whether the waiting task was already cancelled, read under the lock: a
    /// cancellation handler that ran before this registration found nothing to cancel, so the
    /// registration itself ends the wait with `CancellationError` and abandons `mid`.
    @_specialize(
        exported:true,where
            Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
            Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
    )
    package mutating func publishSent(
        mid: Int32, topic: String, qos: MQTTQoS, epoch sentOn: UInt64, token: UInt64, cancelled: Bool, ack: Ack
    ) -> Actions {
        var actions = Actions()
        // libmosquitto handed `mid` out again: whatever used it before is settled.
        abandonedPublishes.remove(mid)
        if let codes = earlyAcks.removeValue(forKey: mid) {
            Self.complete(ack, topic: topic, code: codes.first, &actions)
        } else if qos == .atMostOnce && sentOn != epoch {
            actions.fail.append((ack, .connectionLost(reason: "lost before the message was sent")))
        } else if case .closed = phase {
            actions.fail.append((ack, .shutdown))
        } else if cancelled {
            abandonedPublishes.insert(mid)
            actions.cancel.append(ack)
        } else {
            pendingPublishes[mid] = PendingPublish(ack: ack, topic: topic, qos: qos, token: token)
        }
        return actions
    }

    /// The task waiting for publish `mid` (registered with `token`) was cancelled: its wait
    /// ends with `CancellationError` and `mid` is abandoned (libmosquitto may still deliver the
    /// message; a late acknowledgement is dropped). A no-op when that wait is not registered
    /// (yet, or any more: completed, or `mid` now belongs to another publish).
    package mutating func cancelPublish(mid: Int32, token: UInt64) -> Actions {
        var actions = Actions()
        guard let pending = pendingPublishes[mid], pending.token == token else { return actions }
        pendingPublishes[mid] = nil
        abandonedPublishes.insert(mid)
        actions.cancel.append(pending.ack)
        completeDrainIfIdle(&actions)
        return actions
    }

    /// libmosquitto reported a publish complete (QoS 0 written, PUBACK, PUBCOMP or a failing PUBREC).
    @_specialize(
        exported:true,where
            Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
            Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
    )
    package mutating func publishAcknowledged(mid: Int32, reasonCode: Int32) -> Actions {
        var actions = Actions()
        if let pending = pendingPublishes.removeValue(forKey: mid) {
            Self.complete(pending.ack, topic: pending.topic, code: reasonCode, &actions)
            completeDrainIfIdle(&actions)
        } else if abandonedPublishes.remove(mid) == nil {
            earlyAcks[mid] = [reasonCode]
        }
        return actions
    }

    private static func complete(_ ack: Ack, topic: String, code: Int32?, _ actions: inout Actions) {
        if let code, code >= 0x80 {
            actions.fail.append((ack, .publishRejected(topic: topic, reasonCode: Int(code), reason: MQTTError.reasonString(code))))
        } else {
            actions.succeed.append(ack)
        }
    }

    // MARK: subscriptions

    /// The subscription identifier for `filter`, assigned on first use (1...268435455).
    mutating func identifier(for filter: String) -> UInt32 {
        if let existing = filterIdentifiers[filter] { return existing }
        nextFilterIdentifier = nextFilterIdentifier % 268_435_455 + 1
        filterIdentifiers[filter] = nextFilterIdentifier
        return nextFilterIdentifier
    }

    /// Adds subscription `id` (its stream is `sink`). Refused unless connected or
    /// reconnecting; otherwise returns the MQTT 5 subscription identifier of each filter and
    /// the connection epoch its SUBSCRIBEs go out on (give it back to ``subscribeSent(id:_:epoch:cancelled:ack:)``).
    package mutating func addSubscription(
        id: UInt64, filters: [String], qos: MQTTQoS, sink: Sink
    ) -> Result<(identifiers: [UInt32], epoch: UInt64), MQTTError> {
        if let refusal { return .failure(refusal) }
        subscriptions[id] = Subscription(filters: filters, qos: qos, sink: sink)
        return .success((filters.map { identifier(for: $0) }, epoch))
    }

    /// The SUBSCRIBEs of subscription `id` went out as `sent` (mid and filters of each) on
    /// connection `epoch`. With `ack`, the `subscribe()` call waits until every one is
    /// acknowledged — or one is refused (it fails with `subscribeRejected` and the stream
    /// ends), or its task was `cancelled` (read under the lock; the stream ends). Without,
    /// nobody waits (a subscription deferred to the reconnect), but a refusal still ends the
    /// stream. When the connection was lost since `epoch`, those SUBSCRIBEs died with it: the
    /// wait succeeds (the next CONNACK restores the subscription, as for one lost in flight).
    ///
    /// Whatever happens to the wait, the mids are settled here: a SUBACK that came first is
    /// consumed and one still to come is expected, so no answer to a SUBSCRIBE is ever left
    /// where a later publish given the same mid would take it.
    package mutating func subscribeSent(
        id: UInt64, _ sent: [(mid: Int32, filters: [String])], epoch sentOn: UInt64, cancelled: Bool = false, ack: Ack?
    ) -> Actions {
        var actions = Actions()
        let current = sentOn == epoch
        var awaited = false
        if let ack {
            if cancelled {
                actions.cancel.append(ack)
                endSubscription(id, error: nil, &actions)
            } else if let subscription = subscriptions[id], !subscription.ended {
                if current {
                    subscribeWaits[id] = SubscribeWait(ack: ack, outstanding: sent.count)
                    awaited = true
                } else {
                    actions.succeed.append(ack)
                }
            } else {
                actions.fail.append((ack, subscriptions[id]?.endError ?? .shutdown))
            }
        }
        for (mid, filters) in sent {
            if current { sentSubscribes[mid] = SentSubscribe(filters: filters, awaitedBy: awaited ? id : nil) }
            if let codes = earlyAcks.removeValue(forKey: mid), current {
                subscribeAnswered(mid: mid, codes: codes, &actions)
            }
        }
        if awaited, let wait = subscribeWaits[id], wait.outstanding == 0 {
            subscribeWaits[id] = nil
            actions.succeed.append(wait.ack)
        }
        return actions
    }

    /// The task in `subscribe()` for subscription `id` was cancelled: its wait ends with
    /// `CancellationError` and its stream ends (which unsubscribes it). A no-op once answered.
    package mutating func cancelSubscribe(id: UInt64) -> Actions {
        var actions = Actions()
        guard let wait = subscribeWaits.removeValue(forKey: id) else { return actions }
        actions.cancel.append(wait.ack)
        endSubscription(id, error: nil, &actions)
        return actions
    }

    /// After a reconnect, the restored filters went out: `sent` were handed to libmosquitto
    /// (their SUBACKs are checked; a refusal ends the streams using the filter), `failed`
    /// could not be sent (the streams using them end with that error, so no subscriber stays
    /// silently deaf).
    package mutating func restoreSent(_ sent: [(mid: Int32, filter: String)], failed: [(filter: String, error: MQTTError)]) -> Actions {
        var actions = Actions()
        for (mid, filter) in sent {
            sentSubscribes[mid] = SentSubscribe(filters: [filter], awaitedBy: nil)
            if let codes = earlyAcks.removeValue(forKey: mid) { subscribeAnswered(mid: mid, codes: codes, &actions) }
        }
        for (filter, error) in failed {
            for (id, subscription) in subscriptions where !subscription.ended && subscription.filters.contains(filter) {
                endSubscription(id, error: error, &actions)
            }
        }
        return actions
    }

    /// A SUBACK arrived with the granted QoS (or failure code) of each filter.
    package mutating func subscribeAcknowledged(mid: Int32, codes: [Int32]) -> Actions {
        var actions = Actions()
        if sentSubscribes[mid] == nil {
            // It beat the registration of its mid.
            earlyAcks[mid] = codes
        } else {
            subscribeAnswered(mid: mid, codes: codes, &actions)
        }
        return actions
    }

    private mutating func subscribeAnswered(mid: Int32, codes: [Int32], _ actions: inout Actions) {
        guard let sent = sentSubscribes.removeValue(forKey: mid) else { return }
        let refused = zip(sent.filters, codes).filter { $0.1 >= 0x80 }
        if let (_, code) = refused.first {
            let error = MQTTError.subscribeRejected(
                filters: refused.map(\.0), reasonCode: Int(code), reason: MQTTError.reasonString(code))
            let refusedFilters = Set(refused.map(\.0))
            if let id = sent.awaitedBy { endSubscription(id, error: error, &actions) }
            for (id, subscription) in subscriptions where !subscription.ended && !refusedFilters.isDisjoint(with: subscription.filters) {
                endSubscription(id, error: error, &actions)
            }
        } else if let id = sent.awaitedBy, var wait = subscribeWaits[id] {
            wait.outstanding -= 1
            if wait.outstanding <= 0 {
                subscribeWaits[id] = nil
                actions.succeed.append(wait.ack)
            } else {
                subscribeWaits[id] = wait
            }
        }
    }

    /// Ends subscription `id`'s stream (with `error`); its `onTermination` then removes it
    /// and unsubscribes the filters nobody else uses.
    private mutating func endSubscription(_ id: UInt64, error: MQTTError?, _ actions: inout Actions) {
        guard var subscription = subscriptions[id], !subscription.ended else { return }
        subscription.ended = true
        subscription.endError = error
        subscriptions[id] = subscription
        actions.finishStreams.append((subscription.sink, error))
        // A `subscribe()` still waiting for it learns why (a refusal of a filter it shares).
        if let wait = subscribeWaits.removeValue(forKey: id) { actions.fail.append((wait.ack, error ?? .shutdown)) }
    }

    /// Removes a subscription whose stream ended. Returns the filters no other subscription
    /// uses, to UNSUBSCRIBE (only while connected or reconnecting), and the connection epoch
    /// they are sent on.
    package mutating func removeSubscription(id: UInt64) -> (filters: [String], epoch: UInt64) {
        guard let removed = subscriptions.removeValue(forKey: id), refusal == nil else { return ([], epoch) }
        let stillUsed = Set(subscriptions.values.flatMap(\.filters))
        var seen = Set<String>()
        let unused = removed.filters.filter { !stillUsed.contains($0) && seen.insert($0).inserted }
        for filter in unused { filterIdentifiers[filter] = nil }
        return (unused, epoch)
    }

    /// The filters of the streams still open, each once, to UNSUBSCRIBE in a shutdown that
    /// hands over (the streams stay routed until the loop ends), and the connection epoch
    /// they are sent on. Nothing unless shutting down from a live connection.
    package mutating func filtersToHandOver() -> (filters: [String], epoch: UInt64) {
        guard case .shuttingDown = phase, connectionState == .connected else { return ([], epoch) }
        var seen = Set<String>()
        let filters = subscriptions.values.filter { !$0.ended }.flatMap(\.filters).filter { seen.insert($0).inserted }
        return (filters, epoch)
    }

    /// libmosquitto took an UNSUBSCRIBE as `mid` on connection `epoch`: it is outstanding
    /// until its UNSUBACK, unless that came first or the connection has since been lost.
    package mutating func unsubscribeSent(mid: Int32, epoch sentOn: UInt64) -> Actions {
        var actions = Actions()
        if earlyUnsubacks.remove(mid) != nil {
            completeUnsubacksIfIdle(&actions)
        } else if sentOn == epoch, loopRunning {
            pendingUnsubscribes.insert(mid)
        }
        return actions
    }

    /// The broker acknowledged the UNSUBSCRIBE `mid`.
    package mutating func unsubscribeAcknowledged(mid: Int32) -> Actions {
        var actions = Actions()
        if pendingUnsubscribes.remove(mid) != nil {
            completeUnsubacksIfIdle(&actions)
        } else if earlyUnsubacks.count < 1024 {
            earlyUnsubacks.insert(mid)
        }
        return actions
    }

    private mutating func completeUnsubacksIfIdle(_ actions: inout Actions) {
        if pendingUnsubscribes.isEmpty { resumeAll(\.unsubackWaiters, &actions) }
    }

    /// A message arrived on `topic`: counts it and returns the streams it goes to
    /// (``route(topic:identifiers:)``).
    package mutating func received(topic: String, identifiers: [UInt32] = []) -> [Sink] {
        messagesReceived &+= 1
        return route(topic: topic, identifiers: identifiers)
    }

    /// The streams a message on `topic` goes to. Without subscription identifiers (MQTT
    /// 3.1.1): every stream with a matching filter. With them (MQTT 5, one copy per matching
    /// subscription): a stream takes the copy tagged with the identifier of its first
    /// matching filter, so it receives each publication once.
    package func route(topic: String, identifiers: [UInt32] = []) -> [Sink] {
        subscriptions.values.compactMap { subscription in
            guard !subscription.ended,
                let first = subscription.filters.first(where: { MQTTTopicFilter.matches($0, topic: topic) })
            else { return nil }
            if identifiers.isEmpty { return subscription.sink }
            guard let identifier = filterIdentifiers[first], identifiers.contains(identifier) else { return nil }
            return subscription.sink
        }
    }
}

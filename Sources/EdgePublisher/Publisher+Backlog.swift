import EdgeCore
import FleetcastCore
import OutboxCore

// The backlog drain: it reads, waits and sends as the state's drain steps say.
extension Publisher {
    func drainLoop() async {
        var step = edge.update { $0.drainNext() }
        while true {
            switch step {
            case .stop: return
            case .wait(let condition, let deadline):
                await edge.wait(for: condition, until: deadline)
                if Task.isCancelled { return }
                step = edge.update { $0.drainNext() }
            case .read(let read): step = await self.read(read)
            case .pack(let pack):
                let batch = edge.read { $0.drainBatcher }.batch(pack.records, maximumBytes: pack.maximumBytes)
                step = edge.act { [instant = ContinuousClock.now] in $0.drainPacked(pack, batch, at: instant) }
            case .send(let batch): step = await send(batch)
            }
        }
    }

    /// Reads what `read` asks for from the store and gives it to the state.
    private func read(_ read: EdgeShell.Edge.DrainRead) async -> EdgeShell.Edge.DrainStep {
        let result: Result<[OutboxRecord], any Error>
        do {
            let request = read.request
            result = .success(
                try await storage.backlog(
                    after: request.after, limit: read.limit, maximumBytes: read.maximumBytes, excluding: request.excluding))
        } catch {
            result = .failure(error)
        }
        if Task.isCancelled { return .stop }
        let (wall, instant) = (now().millisecondsSince1970, ContinuousClock.now)
        return edge.act { $0.drainRead(read, result, wallMilliseconds: wall, at: instant) }
    }

    /// Sends one batch once the drain rate lets it go, unless the publisher begins to finish
    /// while it waits for that (then it goes in the stop's last pass), and gives the outcome to
    /// the state.
    private func send(_ batch: EdgeShell.Edge.DrainBatch) async -> EdgeShell.Edge.DrainStep {
        var abandoned = false
        if let notBefore = batch.notBefore {
            await edge.wait(for: .finished, until: notBefore)
            abandoned = isFinishing
        }
        var result: Result<Void, any Error> = .failure(CancellationError())
        let (topic, retain) = edge.read { $0.drainTopic }
        if !Task.isCancelled, !abandoned {
            do {
                try await sender.send(topic: topic, payload: batch.payload, qos: Self.statusQoS, retain: retain)
                result = .success(())
            } catch {
                result = .failure(Task.isCancelled ? CancellationError() : error)
            }
        }
        let instant = ContinuousClock.now
        return edge.act { $0.drainSent(batch, result, at: instant) }
    }

    /// A clean stop over a working link sends what the drain had not sent yet (batched: what
    /// was gathered; live: what was superseded or demoted in the last moments, or a backlog
    /// still draining), as full batches, until `deadline`, rather than leaving it in the store
    /// until the next start. What does not go in time stays there.
    func sendRemainingBacklog(until deadline: ContinuousClock.Instant) async {
        guard ContinuousClock.now < deadline else { return }
        await commit(clean: false)  // what was accepted since the last sync
        edge.update { $0.drainFinal() }  // no hold, no pacing: it stops at what fails or ends
        _ = await withTimeLimit(deadline - .now) { await self.drainLoop() }
    }
}

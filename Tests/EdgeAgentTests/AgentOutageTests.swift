import EdgeOutbox
import FleetProtocol
import FleetcastTestSupport
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The durable outbox under real faults: the built agent binary on `sim:` at 10 Hz, a real
/// mosquitto, the vehicle's link to it through a TCP proxy that the test kills and restarts,
/// `kill -9` of the agent during the outage, and `mosquitto_sub` (a client we did not write)
/// reading everything.
@Suite("Agent outage and crash", .serialized)
struct AgentOutageTests {
    /// Every fix and heading `seq` in `lines` (`topic hex-payload`, ``MosquittoCLI/hexOutput``:
    /// a compact batch is binary), live or inside backlog batches and batches.
    static func seqs(_ lines: [String], topicSuffix: String? = nil) -> [Int] {
        lines.flatMap { line -> [Int] in
            guard let (topic, payload) = MosquittoCLI.hexMessage(line) else { return [] }
            if let topicSuffix, !topic.hasSuffix(topicSuffix) { return [] }
            if topic.hasSuffix("/backlog") || topic.hasSuffix("/batch") {
                return (try? FleetPayload.decodeBatch(payload, vehicle: VehicleID("v1")!))?.events.compactMap { $0.seq.map(Int.init) } ?? []
            }
            if topic.hasSuffix("/fix") || topic.hasSuffix("/heading") {
                let object = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
                return (object?["seq"] as? Int).map { [$0] } ?? []
            }
            return []
        }
    }

    /// The runs of consecutive numbers in `numbers` (rising).
    static func blocks(_ numbers: [Int]) -> [ClosedRange<Int>] {
        var blocks: [ClosedRange<Int>] = []
        for number in numbers {
            if let last = blocks.last, last.upperBound + 1 == number {
                blocks[blocks.count - 1] = last.lowerBound...number
            } else {
                blocks.append(number...number)
            }
        }
        return blocks
    }

    static func statuses(_ lines: [String]) -> [[String: Any]] {
        lines.compactMap { MosquittoCLI.hexMessage($0) }.filter { $0.topic == "fleet/v1/status" }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.payload))) as? [String: Any]
        }
    }

    /// Whether `line` is an `online` status of a run whose `since` is not in `earlier`.
    static func isStatus(_ line: String, sinceNotIn earlier: Set<String>) -> Bool {
        guard let status = statuses([line]).first, status["state"] as? String == "online",
            let since = status["since"] as? String
        else { return false }
        return !earlier.contains(since)
    }

    /// Returns once the agent's offline status, the last thing a clean stop sends, has reached
    /// the subscriber: what the agent sent before it has arrived too.
    static func waitForOffline(_ subscriber: MosquittoCLI.Subscriber) async throws {
        try await waitUntil("the offline status", timeout: .seconds(20), interval: .milliseconds(50)) {
            statuses(subscriber.messagesSoFar).last?["state"] as? String == "offline"
        }
    }

    /// How many records the outbox of `vehicle`'s agent in `state` holds now, read beside the running agent
    /// (SQLite in WAL mode lets a reader in); 0 while it cannot be read.
    static func storedCount(_ state: String, vehicle: String = "v1") -> Int {
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        sqlite.arguments = [OutboxStore.path(directory: state, vehicle: VehicleID(vehicle)!), "SELECT count(*) FROM event"]
        let output = Pipe()
        sqlite.standardOutput = output
        sqlite.standardError = FileHandle.nullDevice
        guard (try? sqlite.run()) != nil else { return 0 }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        sqlite.waitUntilExit()
        return Int(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// The agent's environment: every fix, and in batched mode (`uplink.batch`) a 1 s window.
    static func environment(batched: Bool) -> [String: String] {
        batched ? agentEveryFixEnvironment.merging(["FLEETCAST_UPLINK_BATCH": "1"]) { $1 } : agentEveryFixEnvironment
    }

    @Test(
        "link cut, agent killed with SIGKILL during the outage and restarted, link restored: nothing stored is lost, the backlog arrives oldest first, the retained fix (batched: batch) is the newest",
        arguments: [false, true]
    )
    func outageAndCrash(batched: Bool) async throws {
        // Live: fixes on …/fix, the outage on …/backlog. Batched: everything on …/batch.
        let (liveSuffix, backlogSuffix) = batched ? ("/batch", "/batch") : ("/fix", "/backlog")
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        var proxy = try await TCPProxy(to: broker.port)
        let port = proxy.port
        let everything = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/v1/#", count: 100_000, timeoutSeconds: 120, extra: MosquittoCLI.hexOutput)
        let state = try makeTemporaryDirectory(prefix: "agent-outage")
        func startAgent() throws -> TestProcess {
            try TestProcess(
                builtProduct("fleetcast-agent"),
                [
                    "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(port)",
                    "--state-dir", state, "--log-level", "debug",
                ], directory: state, name: "agent-\(UUID().uuidString.prefix(4))", environment: Self.environment(batched: batched))
        }
        var agent = try startAgent()
        try await waitUntil("live fixes to arrive", timeout: .seconds(20)) { Self.seqs(everything.messagesSoFar).count >= 20 }

        // The vehicle drives into a dead zone: 8 s at 10 Hz, one record an instant, stored.
        await proxy.kill()
        try await waitUntil("80 records stored in the outage", timeout: .seconds(60), interval: .milliseconds(200)) {
            Self.storedCount(state) >= 80
        }
        // Power cut while it is out of coverage: what was committed must survive.
        let storedAtCrash = Self.storedCount(state)
        agent.send(SIGKILL)
        _ = await agent.waitForExit()
        let firstRunLog = agent.standardError
        let firstRunSince = Set(Self.statuses(everything.messagesSoFar).compactMap { $0["since"] as? String })
        agent = try startAgent()
        // 6 s more of the outage, stored by the restarted agent.
        try await waitUntil("60 records more stored after the restart", timeout: .seconds(60), interval: .milliseconds(200)) {
            Self.storedCount(state) >= storedAtCrash + 60
        }
        // Coverage again.
        proxy = try await TCPProxy(port: port, to: broker.port)
        let restoredAt = ContinuousClock.now
        // Drained when the restarted agent's first status has arrived and every record numbered
        // before its first live fix has arrived but for one block: the crash's (the last sync
        // interval's records, neither stored nor delivered, and the numbers reserved ahead and
        // skipped). Counting from the second run's own messages matters: the first run's last
        // live fixes may still be on their way to the subscriber at the cut. (The status's own
        // backlog count is a sample: while live fixes flow, one superseded before it went live
        // may be waiting for the next commit at any moment.)
        var restartStatus: [String: Any] = [:]
        try await waitUntil("the backlog to drain", timeout: .seconds(60)) {
            let lines = everything.messagesSoFar
            // Batched, the newest event a batch of the second run brought: the drain is oldest first.
            guard let restart = lines.firstIndex(where: { Self.isStatus($0, sinceNotIn: firstRunSince) }),
                let firstLive = batched
                    ? Self.seqs(Array(lines[restart...]), topicSuffix: "/batch").max()
                    : Self.seqs(Array(lines[restart...]), topicSuffix: "/fix").first
            else { return false }
            restartStatus = Self.statuses([lines[restart]]).first ?? [:]
            let delivered = Set(Self.seqs(lines))
            return Self.blocks((1..<firstLive).filter { !delivered.contains($0) }).count <= 1
        }
        let drainTime = ContinuousClock.now - restoredAt
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        try await Self.waitForOffline(everything)
        let lines = everything.messagesSoFar

        // What had not arrived by the stop waits in the store for the next run.
        let kept = try await OutboxStore.open(
            directory: state, vehicle: VehicleID("v1")!, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        .storage.backlog(after: 0, limit: 100_000, maximumBytes: 1 << 30, excluding: []).map { Int($0.seq) }
        let delivered = Set(Self.seqs(everything.messagesSoFar)).union(kept)
        let newest = try #require(delivered.max())
        let missing = (1...newest).filter { !delivered.contains($0) }
        // Only the crash's numbers may be missing, in one block: the last sync interval's
        // unwritten records (at 10 Hz, about 10) and the unused rest of the reservation (128).
        // The skip is no loss (a new run begins), and the status does not count it as one.
        #expect(restartStatus["dropped"] as? Int == 0, "nothing dropped: \(restartStatus)")
        #expect(restartStatus["droppedUnclean"] == nil, "no count of skipped numbers: \(restartStatus)")
        #expect(
            Self.blocks(missing).count == 1, "missing \(missing.count): one block, the crash's; first run:\n\(firstRunLog.suffix(3000))")
        #expect(missing.count <= 128 + 40, "at most the reservation and a sync interval's records: \(missing.count)")
        // The outage, at 10 Hz and one record an instant (its fix with its heading): 8 s before
        // the crash and 6 s after it, ~140 records stored and delivered later (minus the last
        // sync interval's before the crash).
        let backlogSeqs = Self.seqs(lines, topicSuffix: backlogSuffix)
        #expect(backlogSeqs.count > 100, "the outage's records came as backlog: \(backlogSeqs.count)")
        #expect(backlogSeqs == backlogSeqs.sorted(), "oldest first")
        #expect(
            lines.compactMap { MosquittoCLI.hexMessage($0) }.allSatisfy {
                $0.topic != "fleet/v1\(backlogSuffix)" || $0.payload.count <= FleetPayload.maximumBacklogBytes
            })
        if batched {
            #expect(!lines.contains { $0.hasPrefix("fleet/v1/fix ") || $0.hasPrefix("fleet/v1/heading ") }, "nothing live")
        }
        let liveFixSeqs = Self.seqs(everything.messagesSoFar, topicSuffix: liveSuffix)
        let retained = try #require(
            try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1\(liveSuffix)", extra: MosquittoCLI.hexOutput))
        let retainedSeq = batched ? Self.seqs([retained]).max() : Self.seqs([retained]).first
        #expect(retainedSeq == liveFixSeqs.max(), "the retained fix (batched: the last batch) is the newest position")
        #expect(drainTime < .seconds(30), "drained within 30 s of the link's return (took \(drainTime))")
        await everything.stop()
    }

    @Test(
        "a 20 s outage at 10 Hz: every event arrives, and the backlog in full batches (at most one backlog message per 20 events), not a trickle of single events"
    )
    func twentySecondOutageDrainsInFullBatches() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        var proxy = try await TCPProxy(to: broker.port)
        let port = proxy.port
        let everything = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/v1/#", count: 1_000_000, timeoutSeconds: 120, extra: MosquittoCLI.hexOutput)
        let state = try makeTemporaryDirectory(prefix: "agent-outage20")
        let config = "\(state)/agent.yaml"
        try "qos:\n  heading: 1\n".write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--config", config, "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(port)",
                "--state-dir", state,
            ], directory: state, name: "agent", environment: agentEveryFixEnvironment)
        try await waitUntil("live fixes to arrive", timeout: .seconds(20)) { Self.seqs(everything.messagesSoFar).count >= 20 }
        await proxy.kill()
        let cutAt = Self.seqs(everything.messagesSoFar).max() ?? 0
        // 20 s at 10 Hz: 200 instants, one record each, stored for later.
        try await waitUntil("200 records stored in the outage", timeout: .seconds(90), interval: .milliseconds(200)) {
            Self.storedCount(state) >= 200
        }
        proxy = try await TCPProxy(port: port, to: broker.port)
        // Drained when every record of the outage has arrived, then 10 s more of live driving
        // (100 live records at 10 Hz).
        var firstLiveAfter = 0
        try await waitUntil("the backlog to drain", timeout: .seconds(60)) {
            let lines = everything.messagesSoFar
            guard let firstLive = Self.seqs(lines, topicSuffix: "/fix").first(where: { $0 > cutAt + 150 }) else { return false }
            firstLiveAfter = firstLive
            let delivered = Set(Self.seqs(lines))
            return (1..<firstLive).allSatisfy { delivered.contains($0) }
        }
        try await waitUntil("10 s more of live driving", timeout: .seconds(60), interval: .milliseconds(100)) {
            (Self.seqs(everything.messagesSoFar, topicSuffix: "/fix").max() ?? 0) >= firstLiveAfter + 100
        }
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        try await Self.waitForOffline(everything)
        let lines = everything.messagesSoFar
        let backlogMessages = lines.filter { $0.hasPrefix("fleet/v1/backlog ") }
        let backlogEvents = Self.seqs(lines, topicSuffix: "/backlog").count
        #expect(backlogEvents >= 150, "the outage (200 instants) came as backlog: \(backlogEvents) events")
        #expect(
            backlogMessages.count * 20 <= backlogEvents,
            "\(backlogEvents) backlog events in \(backlogMessages.count) messages: \(backlogMessages.map { Self.seqs([$0]).count })")
        let kept = try await OutboxStore.open(
            directory: state, vehicle: VehicleID("v1")!, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        .storage.backlog(after: 0, limit: 100_000, maximumBytes: 1 << 30, excluding: []).map { Int($0.seq) }
        let delivered = Set(Self.seqs(lines))
        let newest = try #require(delivered.union(kept).max())
        let missing = (1...newest).filter { !delivered.contains($0) && !kept.contains($0) }
        #expect(missing.isEmpty, "every event arrived or waits in the store; missing \(missing.count): \(missing.prefix(20))")
        await everything.stop()
    }

    @Test(
        "a corrupt store at start is moved aside (never deleted), named in one error, and the agent publishes from a new one (live, and batched)",
        arguments: [false, true])
    func corruptStoreAtStart(batched: Bool) async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let state = try makeTemporaryDirectory(prefix: "agent-corrupt")
        let storePath = "\(state)/v1.outbox"
        try #require(FileManager.default.createFile(atPath: storePath, contents: Data(repeating: 0xA5, count: 8192)))
        let (filter, count) = batched ? ("fleet/v1/batch", 2) : ("fleet/v1/fix", 5)
        let fixes = try await MosquittoCLI.subscribe(
            broker: broker, filter: filter, count: count, timeoutSeconds: 30, extra: MosquittoCLI.hexOutput)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)",
                "--state-dir", state,
            ], directory: state, name: "agent", environment: Self.environment(batched: batched))
        #expect(await fixes.messages().count == count, "fixes flow")
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        let log = agent.standardError
        let errors = log.split(separator: "\n").filter { $0.contains(" error ") }
        #expect(errors.count == 1, "one error: \(errors)")
        #expect(errors.first?.contains(storePath) == true, "naming the path")
        let aside = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("v1.outbox.corrupt-") }
        #expect(aside.count == 1, "moved aside, not deleted")
    }
}

/// The longest of the outages, a suite of its own: the others take their turns one by one
/// ("Agent outage and crash", serialized), this one beside them, so the ThreadSanitizer run is
/// bounded by the longer of the two (it was their sum). Each test has its own broker, link and
/// state directory.
@Suite("Agent outage of ten minutes")
struct AgentLongOutageTests {
    /// The outage tests' helpers.
    typealias Outage = AgentOutageTests

    @Test(
        "link cut for 10 minutes of driving at 10 Hz (sim at 10x time), then restored: every fix and heading arrives, the retained fix is the newest, the backlog drains oldest first, and the agent reconnects within seconds"
    )
    func tenMinuteOutage() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        var proxy = try await TCPProxy(to: broker.port)
        let port = proxy.port
        let everything = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/v1/#", count: 1_000_000, timeoutSeconds: 300, extra: MosquittoCLI.hexOutput)
        let state = try makeTemporaryDirectory(prefix: "agent-outage10")
        let config = "\(state)/agent.yaml"
        // Headings at QoS 1 too: a QoS 0 message counts as delivered once written to the socket,
        // so one written into the connection as it dies is gone (MQTT's own rule).
        try "qos:\n  heading: 1\noutbox:\n  drainRate: 1000\n".write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--config", config, "--source", "sim:?rate=10&timeScale=10", "--vehicle", "v1",
                "--broker", "mqtt://127.0.0.1:\(port)", "--state-dir", state,
            ], directory: state, name: "agent", environment: agentEveryFixEnvironment)
        try await waitUntil("live fixes to arrive", timeout: .seconds(20)) { Outage.seqs(everything.messagesSoFar).count >= 50 }
        await proxy.kill()
        let cutAt = Outage.seqs(everything.messagesSoFar).max() ?? 0
        // 600 s of receiver time at 10 Hz: 6,000 fixes, each with its heading, stored for later.
        try await waitUntil("6,000 records stored in the outage", timeout: .seconds(180), interval: .milliseconds(500)) {
            Outage.storedCount(state) >= 6_000
        }
        proxy = try await TCPProxy(port: port, to: broker.port)
        let restoredAt = ContinuousClock.now
        try await waitUntil("the link to be used again", timeout: .seconds(20)) {
            Outage.seqs(everything.messagesSoFar, topicSuffix: "/fix").contains { $0 > cutAt + 5_500 }
        }
        let reconnected = ContinuousClock.now - restoredAt
        // Drained when every record of the outage (all numbered before the first live fix
        // after the link came back) has arrived.
        var firstLiveAfter = 0
        try await waitUntil("the backlog to drain", timeout: .seconds(60)) {
            let lines = everything.messagesSoFar
            guard let firstLive = Outage.seqs(lines, topicSuffix: "/fix").first(where: { $0 > cutAt + 5_500 }) else { return false }
            firstLiveAfter = firstLive
            let delivered = Set(Outage.seqs(lines))
            return (1..<firstLive).allSatisfy { delivered.contains($0) }
        }
        let drained = ContinuousClock.now - restoredAt
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        try await Outage.waitForOffline(everything)
        let lines = everything.messagesSoFar
        let delivered = Set(Outage.seqs(lines))
        #expect(firstLiveAfter - cutAt > 6_000, "the outage produced \(firstLiveAfter - cutAt) records")
        // What did not arrive by the stop (records superseded while live fixes flowed, waiting
        // for the drain) is kept in the store for the next run: nothing is lost.
        let kept = try await OutboxStore.open(
            directory: state, vehicle: VehicleID("v1")!, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        .storage.backlog(after: 0, limit: 100_000, maximumBytes: 1 << 30, excluding: []).map { Int($0.seq) }
        let newest = try #require((delivered.union(kept)).max())
        let missing = (1...newest).filter { !delivered.contains($0) && !kept.contains($0) }
        #expect(missing.isEmpty, "every fix and heading arrived or waits in the store; missing \(missing.count): \(missing.prefix(20))")
        let backlogSeqs = Outage.seqs(lines, topicSuffix: "/backlog")
        #expect(backlogSeqs.count >= 5_900, "the outage came as backlog: \(backlogSeqs.count)")
        let joined = lines.filter { $0.hasPrefix("fleet/v1/backlog ") }.prefix(10).compactMap { MosquittoCLI.hexMessage($0) }
            .flatMap { (try? FleetPayload.decodeBacklog($0.payload, vehicle: VehicleID("v1")!))?.events ?? [] }
        #expect(
            joined.filter { if case .fix(let f) = $0 { f.fix.heading != nil } else { false } }.count >= joined.count - 1,
            "the backlog's fixes carry their headings: one record an instant")
        #expect(backlogSeqs == backlogSeqs.sorted(), "oldest first")
        let retained = try #require(try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/fix", extra: MosquittoCLI.hexOutput))
        #expect(Outage.seqs([retained]).first == Outage.seqs(lines, topicSuffix: "/fix").max(), "the retained fix is the newest")
        // Bounds, not speed targets (fleetcast-bench drain measures those): the reconnect delay
        // is capped at 5 s, and 6,000 events at 1,000/s take 6 s; the rest is margin for a
        // loaded machine running this under ThreadSanitizer beside the other tests.
        #expect(reconnected < .seconds(15), "reconnected \(reconnected) after the link came back")
        #expect(drained < .seconds(120), "drained \(drained) after the link came back (6,000 events at 1,000/s)")
        #expect(Outage.statuses(lines).allSatisfy { ($0["dropped"] as? Int ?? 0) == 0 }, "nothing dropped")
        await everything.stop()
    }
}

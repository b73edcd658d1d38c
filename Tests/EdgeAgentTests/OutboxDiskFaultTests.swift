import EdgeCore
import EdgeOutbox
import EdgePublisher
import EdgeTestSupport
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import InMemoryLogging
import Logging
import OutboxCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The outbox on file systems that refuse it, made for real with `mount` (tmpfs): a read-only
/// state directory and a full disk. Needs root, as the README's test command runs.
@Suite("Outbox on a read-only or full disk", .serialized, .enabled(if: geteuid() == 0, "mount needs root"))
struct OutboxDiskFaultTests {
    /// Mounts a tmpfs of `size` at a new directory (read-only when `readOnly`); unmount with the returned closure.
    static func tmpfs(size: String, readOnly: Bool) throws -> (path: String, unmount: () -> Void) {
        let path = try makeTemporaryDirectory(prefix: "fleetcast-tmpfs")
        try run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)\(readOnly ? ",ro" : "")", "tmpfs", path])
        return (
            path,
            {
                try? run("/bin/umount", ["-l", path])
                try? FileManager.default.removeItem(atPath: path)
            }
        )
    }

    static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSupportError.processFailed("\(tool) \(arguments)", status: process.terminationStatus, output: "")
        }
    }

    @Test(
        "a read-only state directory: the agent publishes (live, or batched from memory), logs one error naming the path, and reports storage degraded",
        arguments: [false, true])
    func readOnlyStateDirectory(batched: Bool) async throws {
        let (state, unmount) = try Self.tmpfs(size: "1m", readOnly: true)
        defer { unmount() }
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        // Batched (1 s): the first fix at once, then a batch a second.
        let (filter, count) = batched ? ("fleet/v1/batch", 3) : ("fleet/v1/fix", 10)
        let fixes = try await MosquittoCLI.subscribe(
            broker: broker, filter: filter, count: count, timeoutSeconds: 30, extra: MosquittoCLI.hexOutput)
        let work = try makeTemporaryDirectory(prefix: "agent-readonly")
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)",
                "--state-dir", state,
            ], directory: work, name: "agent",
            environment: agentEveryFixEnvironment.merging(batched ? ["FLEETCAST_UPLINK_BATCH": "1"] : [:]) { $1 })
        let messages = await fixes.messages().compactMap { MosquittoCLI.hexMessage($0) }
        #expect(messages.count == count, "fixes flow")
        if batched {
            let seqs = try messages.flatMap { try FleetPayload.decodeBatch($0.payload, vehicle: VehicleID("v1")!).events.compactMap(\.seq) }
            #expect(seqs == Array(1...UInt64(max(1, seqs.count))), "every event from memory, in order: \(seqs)")
            #expect(seqs.count >= 10)
        }
        let retained = try #require(try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status"))
        let status = try #require(
            try JSONSerialization.jsonObject(with: Data(retained.dropFirst("fleet/v1/status ".count).utf8)) as? [String: Any])
        #expect(status["storage"] as? String == "degraded")
        #expect((status["storageReason"] as? String)?.contains(state) == true, "the reason names the path: \(status)")
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0, "no crash, no crash loop")
        let errors = agent.standardError.split(separator: "\n").filter { $0.contains(" error ") }
        #expect(errors.count == 1, "one error, not a flood: \(errors)")
        #expect(errors.first?.contains(state) == true)
    }

    @Test("a full disk: one error, storage degraded, live goes on, and what the store could not take still arrives")
    func fullDisk() async throws {
        let (state, unmount) = try Self.tmpfs(size: "160k", readOnly: false)
        defer { unmount() }
        let vehicle = VehicleID("v1")!
        let capture = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in capture }
        let sender = RecordingSender(failing: true)
        var settings = Publisher.Settings.quick(vehicle: vehicle)
        settings.initialRetryDelay = .milliseconds(5)
        settings.maxRetryDelay = .milliseconds(50)
        settings.drainRate = 100_000
        settings.statusInterval = .milliseconds(50)
        let publisher = Publisher(
            settings: settings, sender: sender, store: await OutboxStore.open(directory: state, vehicle: vehicle, logger: logger),
            logger: logger)
        let running = Task { await publisher.run() }
        let total = 2_000  // ~450 KB of payloads: the 160 KiB disk fills up on the way
        for index in 0..<total {
            publisher.publish(.fix(Fixes.fix(at: Double(index) / 10, east: Double(index))))
            if index % 100 == 99 { try await Self.syncRound(publisher) }
        }
        try await waitUntil("the storage problem", timeout: .seconds(30)) { publisher.storageProblem != nil }
        #expect(publisher.storageProblem?.contains(state) == true, "names the store's path: \(publisher.storageProblem ?? "")")
        sender.setFailing(false)
        publisher.retryNow()
        // Decoded as they arrive: each send looks at the messages new since the last one.
        let seen = Locked((messages: 0, seqs: Set<UInt64>()))
        try await withTimeout(60) {
            await sender.waitUntil { snapshot in
                seen.withLock { seen in
                    seen.seqs.formUnion(Self.delivered(Array(snapshot.sent[seen.messages...]), vehicle))
                    seen.messages = snapshot.sent.count
                    return seen.seqs.count >= total
                }
            }
        }
        #expect(Set(Self.delivered(sender.sent, vehicle)) == Set(1...UInt64(total)), "nothing lost")
        let statuses = sender.sent.filter { $0.topic.hasSuffix("/status") }.map(\.text)
        #expect(statuses.contains { $0.contains(#""storage":"degraded""#) })
        publisher.finish()
        try await withTimeout { await running.value }
        let errors = capture.entries.filter { $0.level == .error }
        #expect(errors.count == 1, "one error: \(errors.map(\.message))")
    }

    @Test(
        "a store on a card remounted read-only: memory fallback, numbering past everything the store reserved, its backlog left in place",
        arguments: [false, true])
    func storeRemountedReadOnly(uncleanStop: Bool) async throws {
        let (state, unmount) = try Self.tmpfs(size: "4m", readOnly: false)
        defer { unmount() }
        let (card, unmountCard) = try Self.tmpfs(size: "4m", readOnly: false)
        defer { unmountCard() }
        let vehicle = VehicleID("v1")!
        let quiet = Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        let reserved: UInt64 = 500
        /// The store's files as they are now, on the card (a file system cannot be remounted
        /// read-only while a file on it is open for writing).
        func copyToCard() throws {
            let path = OutboxStore.path(directory: state, vehicle: vehicle)
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.copyItem(
                    atPath: path + suffix, toPath: OutboxStore.path(directory: card, vehicle: vehicle) + suffix)
            }
        }
        do {
            let store = await OutboxStore.open(directory: state, vehicle: vehicle, logger: quiet)
            let records = (UInt64(1)...40).map { OutboxRecord(seq: $0, kind: .fix, storedAtMilliseconds: 1, payload: Array("{}".utf8)) }
            _ = try await store.storage.commit(
                OutboxCommit(
                    inserts: records, deletes: [], nextSeq: 41, reservedSeq: reserved, clean: false,
                    expiresBeforeMilliseconds: 0, maximumBytes: 1 << 20, protected: []))
            if uncleanStop {
                // As a crash leaves it: the WAL and its index beside the database.
                #expect(FileManager.default.fileExists(atPath: OutboxStore.path(directory: state, vehicle: vehicle) + "-wal"))
                try copyToCard()
            } else {
                await store.close()  // a clean stop: one database file, its WAL checkpointed
            }
        }
        if !uncleanStop { try copyToCard() }
        try Self.run("/bin/mount", ["-o", "remount,ro", card])
        let capture = InMemoryLogHandler()
        let reopened = await OutboxStore.open(directory: card, vehicle: vehicle, logger: Logger(label: "t") { _ in capture })
        #expect(reopened.degradedReason != nil, "a read-only store cannot be written: degraded")
        #expect(reopened.nextSeq >= reserved, "no number the store reserved is handed out again (next \(reopened.nextSeq))")
        let errors = capture.entries.filter { $0.level == .error }
        #expect(errors.count == 1)
        #expect(errors.first?.metadata["outbox.kept"]?.description == "40", "says what waits in the store")
    }

    /// Returns once the publisher's sync loop has started a round after this moment: the round
    /// before it, which took what was published by then (its commit written or failed), is over.
    static func syncRound(_ publisher: Publisher) async throws {
        let now = ContinuousClock.now
        try await waitUntil("the sync loop to start a round", timeout: .seconds(30)) { publisher.lastActivity > now }
    }

    static func delivered(_ sent: [RecordingSender.Sent], _ vehicle: VehicleID) -> [UInt64] {
        sent.flatMap { message -> [UInt64] in
            if message.topic.hasSuffix("/backlog") {
                return (try? FleetPayload.decodeBacklog(message.payload, vehicle: vehicle))?.events.compactMap(\.seq) ?? []
            }
            if message.topic.hasSuffix("/fix") {
                return (try? FleetPayload.decodeFix(message.payload, vehicle: vehicle)).flatMap(\.seq).map { [$0] } ?? []
            }
            return []
        }
    }
}

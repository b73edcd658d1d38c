import FleetProtocol
import FleetWatch
import FleetcastTestSupport
import Foundation
import GNSS
import InMemoryLogging
import Logging
import MQTT
import Synchronization
import Testing

/// FleetSubscriber against a real mosquitto, with messages sent by `mosquitto_pub`.
@Suite(.serialized) struct FleetSubscriberTests {
    let van = VehicleID("van-7")!
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func fixJSON(_ seq: UInt64, lat: Double, vehicle: String = "van-7") -> String {
        String(
            decoding: FleetPayload.encode(
                Fix(
                    time: time, latitude: lat, longitude: 2.5, speed: 3, mode: .threeD,
                    satellitesUsed: 8), vehicle: vehicle, seq: seq), as: UTF8.self)
    }

    func configuration(_ broker: TestBroker, port: Int? = nil) throws -> MQTTConfiguration {
        MQTTConfiguration(
            broker: BrokerURL(host: broker.host, port: port ?? broker.port),
            clientID: "fleet-watch-test-\(UUID().uuidString.prefix(8))",
            reconnect: MQTTReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .milliseconds(400)))
    }

    /// Publishes a payload from a file (for payloads `-m` cannot carry: large, not UTF-8).
    func publishFile(_ broker: TestBroker, topic: String, bytes: [UInt8]) async throws {
        let path = "\(broker.directory)/payload-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let p = try TestProcess(
            "/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", topic, "-f", path, "-q", "1"],
            directory: broker.directory, name: "pub-\(UUID().uuidString)")
        #expect(await p.waitForExit() == 0, "\(p.standardError)")
    }

    /// Collects a stream's events in a task until `done` says enough.
    final class Collector: Sendable {
        let events = Mutex<[FleetEvent]>([])
        var snapshot: [FleetEvent] { events.withLock { $0 } }

        func collect(_ stream: AsyncThrowingStream<FleetEvent, any Error>) -> Task<Void, any Error> {
            Task {
                for try await event in stream { events.withLock { $0.append(event) } }
            }
        }

        func wait(_ what: String, timeout: Duration = .seconds(15), until condition: @escaping ([FleetEvent]) -> Bool) async throws {
            try await waitUntil(what, timeout: timeout) { condition(self.snapshot) }
        }
    }

    @Test func eventsArriveAndBadMessagesAreCountedNotThrown() async throws {
        try await withBroker { broker in
            // A retained status first: its arrival shows the subscription is active.
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/status",
                message: #"{"v":1,"vehicle":"van-7","state":"online"}"#, retain: true)
            let subscriber = try FleetSubscriber(configuration: configuration(broker), logger: Logger(label: "test"))
            let collector = Collector()
            let task = collector.collect(subscriber.events())
            defer { task.cancel() }
            try await collector.wait("the retained status") { $0.count >= 1 }

            for (seq, lat) in [(1, 10.0), (2, 11.0), (5, 15.0), (5, 15.0)] {  // 3 and 4 lost, 5 delivered twice
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON(UInt64(seq), lat: lat))
            }
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/heading",
                message: #"{"v":1,"vehicle":"van-7","seq":6,"heading":91.5,"source":"HDT"}"#)
            // Malformed: bad JSON, wrong types, > 64 KiB, bad topic levels, not UTF-8.
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: #"{"v":1,"lat":"#)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/heading",
                message: #"{"v":1,"seq":7,"heading":"north","source":"HDT"}"#)
            try await publishFile(
                broker, topic: "fleet/van-7/fix",
                bytes: Array(#"{"v":1,"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 70_000) + Array(#""}"#.utf8))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/b@d/fix", message: fixJSON(1, lat: 1))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/speed", message: "12")
            try await publishFile(
                broker, topic: "fleet/van-7/status", bytes: Array(#"{"v":1,"state":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/status",
                message: #"{"v":1,"vehicle":"van-7","state":"offline"}"#)
            try await collector.wait("the offline status") { events in
                events.contains { if case .status(let s) = $0 { s.state == .offline } else { false } }
            }

            let events = collector.snapshot
            #expect(events.count == 13)
            let malformed = events.compactMap { if case .malformed(let topic, let reason) = $0 { (topic, reason) } else { nil } }
            #expect(
                malformed.map(\.0) == [
                    "fleet/van-7/fix", "fleet/van-7/heading", "fleet/van-7/fix", "fleet/b@d/fix",
                    "fleet/van-7/speed", "fleet/van-7/status",
                ])
            #expect(malformed[1].1 == #"key "heading" is not a number"#)
            #expect(malformed[2].1.contains("exceeds 65536 bytes"))
            #expect(malformed[5].1.contains("invalid UTF-8"))

            var state = FleetState()
            for event in events { state.apply(event, at: time) }
            let v = try #require(state[van])
            #expect(state.malformedCount == 6)
            #expect(v.malformed == 4)
            #expect(v.gaps == 2)
            #expect(v.sequence.duplicates == 1)
            #expect(v.fix?.latitude == 15)
            #expect(v.heading?.trueHeading == 91.5)
            #expect(v.online == false)
            #expect(state.count == 1)
        }
    }

    @Test func aBacklogBatchClosesTheGapItsLiveFixOpened() async throws {
        try await withBroker { broker in
            let subscriber = try FleetSubscriber(configuration: configuration(broker), logger: Logger(label: "test"))
            let collector = Collector()
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON(10, lat: 10), retain: true)
            let task = collector.collect(subscriber.events())
            defer { task.cancel() }
            try await collector.wait("the retained fix") { $0.count >= 1 }
            // Back after an outage: the newest fix live (11...19 missing), then the backlog.
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON(20, lat: 20), retain: true)
            var w = FleetPayload.BacklogWriter(vehicle: van)
            for seq in UInt64(11)...19 {
                let appended = w.append(kind: .fix, payload: Array(fixJSON(seq, lat: Double(seq)).utf8))
                #expect(appended)
            }
            try await publishFile(broker, topic: "fleet/van-7/backlog", bytes: w.finish())
            try await collector.wait("the nine backlog fixes") { $0.filter(\.isBacklog).count >= 9 }

            var state = FleetState()
            for event in collector.snapshot.prefix(2) { state.apply(event, at: time) }
            #expect(state[van]?.gaps == 9)
            for event in collector.snapshot.dropFirst(2) { state.apply(event, at: time) }
            let v = try #require(state[van])
            #expect(collector.snapshot.count == 11)
            #expect(collector.snapshot.compactMap(\.seq?.seq) == [10, 20] + Array(11...19))
            #expect(v.gaps == 0)
            #expect(v.fix?.latitude == 20)
            #expect(v.backlog == 9)
            #expect(state.malformedCount == 0)
        }
    }

    @Test func retainedSnapshotHonoursTheVehicleFilter() async throws {
        try await withBroker { broker in
            for vehicle in ["van-7", "bus-1", "tram-2"] {
                try await MosquittoCLI.publish(
                    broker: broker, topic: "acme/fleet/\(vehicle)/fix", message: fixJSON(9, lat: 1, vehicle: vehicle), retain: true)
                try await MosquittoCLI.publish(
                    broker: broker, topic: "acme/fleet/\(vehicle)/status",
                    message: #"{"v":1,"state":"online"}"#, retain: true)
            }
            let topics = try FleetTopics(prefix: "acme/fleet")
            let all = try FleetSubscriber(
                configuration: configuration(broker), options: .init(topics: topics), logger: Logger(label: "test"))
            let everything = try await all.retainedSnapshot(quietPeriod: .milliseconds(300), timeout: .seconds(10))
            #expect(Set(everything.compactMap(\.vehicle).map(\.rawValue)) == ["van-7", "bus-1", "tram-2"])
            #expect(everything.count == 6)

            let some = try FleetSubscriber(
                configuration: configuration(broker),
                options: .init(topics: topics, vehicles: [van, VehicleID("tram-2")!]), logger: Logger(label: "test"))
            #expect(some.filters == ["acme/fleet/van-7/+", "acme/fleet/tram-2/+"])
            let filtered = try await some.retainedSnapshot(quietPeriod: .milliseconds(300), timeout: .seconds(10))
            #expect(Set(filtered.compactMap(\.vehicle).map(\.rawValue)) == ["van-7", "tram-2"])
            #expect(filtered.count == 4)
        }
    }

    @Test func retainedSnapshotOfAMovingFleetEndsWithTheRetainedBurst() async throws {
        try await withBroker { broker in
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: fixJSON(1, lat: 1, vehicle: "van-7"), retain: true)
            // A live vehicle keeps publishing (not retained) every 50 ms: the fleet is never quiet.
            let live = try MQTTClient(configuration: configuration(broker), logger: Logger(label: "live"))
            try await live.connect()
            let feeder = Task {
                var seq: UInt64 = 2
                while !Task.isCancelled {
                    try? await live.publish(topic: "fleet/van-7/fix", string: fixJSON(seq, lat: 2, vehicle: "van-7"), qos: .atLeastOnce)
                    seq += 1
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            defer { feeder.cancel() }
            let subscriber = try FleetSubscriber(configuration: configuration(broker), logger: Logger(label: "test"))
            let clock = ContinuousClock()
            let started = clock.now
            let snapshot = try await subscriber.retainedSnapshot(quietPeriod: .milliseconds(300), timeout: .seconds(10))
            // Done a quiet period after the retained message, not at the timeout.
            #expect(started.duration(to: clock.now) < .seconds(5))
            #expect(snapshot.contains { if case .fix(_, let seq, _) = $0 { seq == 1 } else { false } })
            feeder.cancel()
            _ = await feeder.value
            await live.shutdown()
        }
    }

    @Test func aShareGroupSplitsTheFleetBetweenSubscribers() async throws {
        try await withBroker { broker in
            let options = FleetSubscriber.Options(shareGroup: "watchers")
            let a = try FleetSubscriber(configuration: configuration(broker), options: options, logger: Logger(label: "a"))
            let b = try FleetSubscriber(configuration: configuration(broker), options: options, logger: Logger(label: "b"))
            #expect(a.filters == ["$share/watchers/fleet/+/+"])
            let ca = Collector(), cb = Collector()
            let ta = ca.collect(a.events()), tb = cb.collect(b.events())
            defer { ta.cancel(); tb.cancel() }
            // Shared subscriptions get no retained messages: probe until both are subscribed.
            try await waitUntil("both share-group members to receive", timeout: .seconds(15), interval: .milliseconds(50)) {
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/probe/status", message: #"{"v":1,"state":"online"}"#)
                return !ca.snapshot.isEmpty && !cb.snapshot.isEmpty
            }
            for i in 0..<20 {
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/car-\(i)/fix", message: fixJSON(1, lat: Double(i), vehicle: "car-\(i)"))
            }
            func fixes(_ c: Collector) -> [String] {
                c.snapshot.compactMap { if case .fix(let v, _, _) = $0 { v.rawValue } else { nil } }
            }
            try await waitUntil("all 20 fixes", timeout: .seconds(15)) { fixes(ca).count + fixes(cb).count >= 20 }
            let fa = Set(fixes(ca)), fb = Set(fixes(cb))
            #expect(fa.isDisjoint(with: fb))
            #expect(fa.union(fb) == Set((0..<20).map { "car-\($0)" }))
            #expect(!fa.isEmpty && !fb.isEmpty)
            #expect(fixes(ca).count + fixes(cb).count == 20)
        }
    }

    /// A broker that takes the subscription and then delivers nothing (mosquitto does so for a
    /// user its ACL has no block for) must not look like an idle fleet: the subscriber says
    /// once, at notice, that nothing arrived, naming the user and filters. One that hears
    /// anything says nothing.
    @Test func aSubscriberThatHearsNothingSaysSoOnce() async throws {
        let acl = "user watch+dispatch\ntopic read fleet/#\nuser pub\ntopic write fleet/#\n"
        try await withBroker(.init(users: ["watch+ghost": "pw", "watch+dispatch": "pw", "pub": "pw"], acl: acl)) {
            broker in
            func subscribe(as user: String) throws -> (InMemoryLogHandler, Task<Void, Never>) {
                let memory = InMemoryLogHandler()
                var logger = Logger(label: "test") { _ in memory }
                logger.logLevel = .info
                var mqtt = try configuration(broker)
                mqtt.username = user
                mqtt.password = "pw"
                var options = FleetSubscriber.Options()
                options.silenceNotice = .milliseconds(1_500)
                let subscriber = try FleetSubscriber(configuration: mqtt, options: options, logger: logger)
                let task = Task {
                    do { for try await _ in subscriber.events() {} } catch {}
                }
                return (memory, task)
            }
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"online"}"#, retain: true,
                extra: ["-u", "pub", "-P", "pw"])
            let (ghost, ghostTask) = try subscribe(as: "watch+ghost")
            let (dispatch, dispatchTask) = try subscribe(as: "watch+dispatch")
            defer { ghostTask.cancel(); dispatchTask.cancel() }
            let notice =
                "Nothing received since subscribing: check that vehicles publish, and that the broker's ACL lets this user read these filters"
            try await waitUntil("the notice", timeout: .seconds(15)) { ghost.entries.contains { $0.message.description == notice } }
            try await Task.sleep(for: .seconds(2))
            let said = ghost.entries.filter { $0.message.description == notice }
            #expect(said.count == 1)
            #expect(said.first?.level == .notice)
            #expect(said.first?.metadata["mqtt.user"]?.description == "watch+ghost")
            #expect(said.first?.metadata["mqtt.filters"]?.description.contains("fleet/+/+") == true)
            #expect(!dispatch.entries.contains { $0.message.description == notice }, "a subscriber that got the retained status")
        }
    }

    @Test func anUnreachableBrokerIsNamedInTheLogAndRetried() async throws {
        try await withBroker { broker in
            await broker.stop()
            let memory = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in memory }
            logger.logLevel = .trace
            let subscriber = try FleetSubscriber(configuration: configuration(broker), logger: logger)
            let collector = Collector()
            let task = collector.collect(subscriber.events())
            defer { task.cancel() }
            try await waitUntil("two retries in the log", timeout: .seconds(15)) {
                memory.entries.filter { $0.message.description == "MQTT broker unreachable, retrying" }.count >= 2
            }
            let retry = try #require(memory.entries.first { $0.message.description == "MQTT broker unreachable, retrying" })
            #expect(retry.metadata["mqtt.broker"]?.description == "mqtt://127.0.0.1:\(broker.port)")
            #expect(retry.metadata["mqtt.error"]?.description.contains("connection refused") == true)

            try await broker.restart()
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"online"}"#, retain: true)
            try await collector.wait("the status after the broker came up") { !$0.isEmpty }
            #expect(collector.snapshot.first == .status(VehicleStatus(vehicle: van, state: .online)))
        }
    }

    @Test func stoppingTheConsumerDisconnects() async throws {
        try await withBroker { broker in
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"online"}"#, retain: true)
            let id = "fleet-watch-stop-\(UUID().uuidString.prefix(8))"
            var config = try configuration(broker)
            config.clientID = id
            let subscriber = try FleetSubscriber(configuration: config, logger: Logger(label: "test"))
            let collector = Collector()
            let task = collector.collect(subscriber.events())
            try await collector.wait("the retained status") { !$0.isEmpty }
            task.cancel()
            _ = try? await task.value
            // "disconnected" needs a DISCONNECT; a socket just closed is "closed its connection".
            do {
                try await waitUntil("the broker to log the disconnect") { broker.log.contains("Client \(id) disconnected.") }
            } catch {
                Issue.record("The broker's log ends with:\n\(broker.log.suffix(2000))")
                throw error
            }
        }
    }

    @Test func badShareGroupsAreRefused() throws {
        let config = MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1"), clientID: "x")
        for bad in ["", "a/b", "a+", "#", String(repeating: "g", count: 65)] {
            #expect(throws: FleetSubscriber.InvalidShareGroup.self) {
                try FleetSubscriber(configuration: config, options: .init(shareGroup: bad), logger: Logger(label: "t"))
            }
        }
    }
}

import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT
import Testing

/// One vehicle cannot starve the fleet: a thousand compact batches of 2,048 fixes each, 10 ms
/// apart (a 100 Hz receiver no vehicle has), wait in the recorder's session when it starts,
/// and another vehicle drives meanwhile. Real mosquitto, PostgreSQL, agent and `fleet-watch
/// record`; the recorder's peak memory read from the kernel.
@Suite(.serialized, .tags(.loadsTheMachine), .oneMachineLoadAtATime) struct RunawayVehicleTests {
    /// 1,000 batches of 2,048 fixes 10 ms apart for `vehicle`, published QoS 1 on its `batch`
    /// topic: 2,048,000 fixes in about 6 MB. Each of `distinct` batches (of consecutive `seq`s)
    /// is sent `batches / distinct` times in turn: the recorder decodes and judges every copy as a
    /// new message (its stop summary counts each), and encoding two million fixes in the tests'
    /// debug build took 58 s, more than the rest of the test.
    static func publishFlood(_ vehicle: VehicleID, broker: TestBroker, batches: Int = 1_000, distinct: Int = 50) async throws {
        var logger = Logger(label: "flood")
        logger.logLevel = .warning
        let client = try MQTTClient(
            configuration: MQTTConfiguration(broker: try BrokerURL(parsing: broker.url), clientID: "flood", maxInflightMessages: 100),
            logger: logger)
        try await client.connect()
        let start = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
        var seq: UInt64 = 0
        let payloads = try (0..<distinct).map { _ in
            var writer = FleetPayload.CompactBatchWriter(vehicle: vehicle, run: UInt64(start), maximumBytes: 60_000)
            for _ in 0..<FleetPayload.maximumBacklogEvents {
                seq += 1
                let time = UTCTimestamp(millisecondsSince1970: start + Int64(seq) * 10)
                let fix = Fix(time: time, latitude: 48.85 + Double(seq) * 1e-6, longitude: 2.29, speed: 12, mode: .threeD)
                guard writer.append(fix, seq: seq) else { throw TestSupportError.system("batch full", 0) }
            }
            return writer.finish()
        }
        let topic = FleetTopics.default.batch(vehicle)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<batches {
                let payload = payloads[index % distinct]
                if index >= 100 { try await group.next() }
                group.addImmediateTask { try await client.publish(topic: topic, payload: payload, qos: .atLeastOnce) }
            }
            try await group.waitForAll()
        }
        await client.shutdown()
    }

    /// The process's peak resident set (VmHWM), in bytes.
    static func peakResidentBytes(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kilobytes * 1024
    }

    @Test func aThousandImplausibleBatchesInTheSessionDelayNoOtherVehicleAndCostLittleMemory() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-runaway")
        defer { directory.remove() }
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                // The session exists (persistent, subscribed); the recorder is away while the
                // flood is queued in it.
                var recorder = try FleetRecorderTests.startRecorder(
                    "recorder-runaway", broker: broker, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0)
                try await Self.publishFlood(VehicleID("hog")!, broker: broker)

                recorder = try FleetRecorderTests.startRecorder(
                    "recorder-runaway", broker: broker, postgres: postgres, database: database, directory: directory,
                    extra: ["--log-level", "debug"])
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                let steady = try TestProcess(
                    builtProduct("fleetcast-agent"),
                    [
                        "run", "--source", "sim:?rate=5", "--vehicle", "steady", "--broker", broker.url,
                        "--state-dir", directory.file("state-steady"),
                    ], directory: directory.path, name: "agent-steady",
                    environment: ["FLEETCAST_REPORT_EVERY_FIX": "1"])
                // 60 messages at 5 Hz, each fix published, beside the flood.
                try await waitUntil("60 messages of the steady vehicle published", timeout: .seconds(180), interval: .milliseconds(200)) {
                    try await FleetRecorderTests.lastPublishedSeq("steady", broker: broker) >= 60
                }
                steady.send(SIGTERM)
                #expect(try await steady.waitForExit(timeout: .seconds(20)) == 0, "\(steady.standardError)")
                let stopped = ContinuousClock.now
                let last = try await FleetRecorderTests.lastPublishedSeq("steady", broker: broker)
                do {
                    try await waitUntil("the steady vehicle's last message stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                        let s = try await FleetRecorderDurabilityTests.stored(postgres, database)
                        return s.fixes.union(s.headings).contains { $0.vehicle == "steady" && $0.seq == last }
                    }
                } catch {
                    let s = try await FleetRecorderDurabilityTests.stored(postgres, database)
                    Issue.record(
                        "last \(last); stored \(s.fixes.filter { $0.vehicle == "steady" }.count) fixes, \(s.headings.filter { $0.vehicle == "steady" }.count) headings of steady; recorder: \(recorder.standardError.suffix(4000))"
                    )
                    throw error
                }
                let s = try await FleetRecorderDurabilityTests.stored(postgres, database)
                let fixes = s.fixes.filter { $0.vehicle == "steady" }
                #expect(fixes.count >= 58, "60 messages at 5 Hz: \(fixes.count) fixes stored")
                #expect(Set(s.fixes.union(s.headings).filter { $0.vehicle == "steady" }.map(\.seq)) == Set(1...last))
                #expect(ContinuousClock.now - stopped < .seconds(30))
                #expect(!s.fixes.contains { $0.vehicle == "hog" }, "no fix of a 100 Hz batch is history")

                #expect(recorder.isRunning, "\(recorder.standardError.suffix(2000))")
                let peak = try #require(Self.peakResidentBytes(recorder.pid))
                #expect(peak <= 256 << 20, "the recorder's peak resident memory: \(peak >> 20) MiB")
                let log = recorder.standardError
                #expect(
                    log.components(separatedBy: "A malformed or implausible message was skipped").count == 2,
                    "said once: \(log.suffix(3000))")
                #expect(log.contains("vehicle=hog") && log.contains("implausible"), "\(log.suffix(3000))")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(2000))")
                // Every batch of the flood was received and judged, each copy as a message of its own.
                #expect(recorder.standardError.contains("messages.malformed=1000 "), "\(recorder.standardError.suffix(2000))")
            }
        }
    }
}

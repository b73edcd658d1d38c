import EdgeOutbox
import EdgePublisher
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT

/// `fleetcast-bench outbox`: the durable outbox's own cost.
///
/// 1. Append + acknowledge through the SQLite store: a publisher whose "broker" acknowledges
///    nothing for a while (so every record is written), then everything (so every record is
///    deleted): records per second through the store, both ways.
/// 2. Bytes on disk per stored record (the store file and its WAL, after the outage's commits).
/// 3. Commits (each one `fsync` of the WAL) per minute at 10 Hz: a publisher fed 10 fixes and
///    10 headings a second for `--seconds`, counting the store's transactions.
func runOutboxBenchmark(arguments: [String]) async {
    let records = intOption(arguments, "--records", 100_000)
    let seconds = intOption(arguments, "--seconds", 20)
    print("outbox: \(records) records through the store, then \(seconds) s at 10 Hz")
    do {
        try await measureThroughput(records: records)
        try await measureTenHertz(seconds: seconds)
    } catch {
        print("outbox: failed: \(error)")
    }
}

/// A sender that fails while `failing` is set (an absent broker), else acknowledges at once.
final class SwitchableSender: MessageSending {
    private let state = Locked<(failing: Bool, sent: Int)>((true, 0))
    func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }
    var sent: Int { state.withLock { $0.sent } }
    struct Unreachable: Error {}
    func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws {
        let failing = state.withLock { state -> Bool in
            if !state.failing { state.sent += 1 }
            return state.failing
        }
        if failing { throw Unreachable() }
    }
}

private let quietLogger = Logger(label: "fleetcast-bench") { _ in SwiftLogNoOpLogHandler() }

private func benchFix(_ index: Int) -> Fix {
    Fix(
        time: UTCTimestamp(millisecondsSince1970: 1_763_880_000_000 + Int64(index) * 100),
        latitude: 52.37 + Double(index) * 1e-6, longitude: 4.89 + Double(index) * 1e-6, altitudeHAE: 45.2,
        altitudeMSL: 2.1, speed: 13.9, track: 87.5, climb: 0, mode: .threeD, quality: .gps, satellitesUsed: 11,
        hdop: 0.8, eph: 2.3, epv: 3.1)
}

private func measureThroughput(records: Int) async throws {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-outbox")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let vehicle = VehicleID("bench-1")!
    let sender = SwitchableSender()
    let store = await OutboxStore.open(directory: directory, vehicle: vehicle, logger: quietLogger)
    var settings = Publisher.Settings(vehicle: vehicle)
    settings.initialRetryDelay = .milliseconds(50)
    settings.maxRetryDelay = .milliseconds(50)
    settings.drainRate = 100_000
    let publisher = Publisher(settings: settings, sender: sender, store: store, logger: quietLogger)
    let running = Task { await publisher.run() }
    let clock = ContinuousClock()
    let start = clock.now
    for index in 0..<records {
        publisher.publish(.fix(benchFix(index)))
        if index % 1000 == 999 { await Task.yield() }
    }
    while publisher.backlogCount < records - 1 || publisher.counters.commits == 0 { try await Task.sleep(for: .milliseconds(5)) }
    let written = clock.now - start
    // Wait for one more sync so the last batch is on disk before measuring the files.
    try await Task.sleep(for: .milliseconds(1200))
    let path = OutboxStore.path(directory: directory, vehicle: vehicle)
    let size = fileSize(path) + fileSize(path + "-wal")
    print(
        String(
            format:
                "  intake:  %d records numbered, encoded and taken into the outbox in %.2f s: %.0f records/s (written by the next 1 s commit)",
            records, seconds(written), Double(records) / seconds(written)))
    print(
        String(
            format: "  on disk: %.1f MB for %d records: %.0f bytes per record (payload %d bytes)",
            Double(size) / 1e6, records, Double(size) / Double(records), FleetPayload.encode(benchFix(0), vehicle: "bench-1", seq: 1).count)
    )
    sender.setFailing(false)
    publisher.retryNow()
    let drainStart = clock.now
    while publisher.backlogCount > 0 { try await Task.sleep(for: .milliseconds(20)) }
    let drained = clock.now - drainStart
    print(
        String(
            format: "  acknowledge: %d records sent as backlog and deleted in %.2f s: %.0f records/s (drain rate unlimited here)",
            records, seconds(drained), Double(records) / seconds(drained)))
    publisher.finish()
    await running.value
}

private func measureTenHertz(seconds duration: Int) async throws {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-outbox10")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let vehicle = VehicleID("bench-1")!
    for failing in [false, true] {
        let sender = SwitchableSender()
        sender.setFailing(failing)
        let store = await OutboxStore.open(directory: directory, vehicle: vehicle, logger: quietLogger)
        var settings = Publisher.Settings(vehicle: vehicle)
        settings.initialRetryDelay = .milliseconds(100)
        settings.maxRetryDelay = .seconds(1)
        let publisher = Publisher(settings: settings, sender: sender, store: store, logger: quietLogger)
        let before = publisher.counters.commits
        let running = Task { await publisher.run() }
        for index in 0..<(duration * 10) {
            publisher.publish(.fix(benchFix(index)))
            publisher.publish(.heading(Heading(time: benchFix(index).time, trueHeading: 87.5, source: .hdt)))
            try await Task.sleep(for: .milliseconds(100))
        }
        let after = publisher.counters.commits
        let stored = publisher.backlogCount
        publisher.finish()
        await running.value
        let perMinute = Double(after - before) / Double(duration) * 60
        print(
            String(
                format:
                    "  10 Hz (10 fixes + 10 headings/s), broker %@: %.0f store transactions per minute (each syncs the WAL); backlog after %d s: %d",
                failing ? "absent " : "present", perMinute, duration, stored))
    }
}

private func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

import EdgeOutbox
import EdgePublisher
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT

/// `fleetcast-bench drain [--events N] [--rate EVENTS_PER_S]`: a 10-minute outage's backlog
/// (12,000 fixes and headings at 10 Hz) drained to a real mosquitto while live fixes keep
/// going out at 10 Hz: how long the drain takes, and the live fixes' latency meanwhile
/// (publish call → arrival at a subscriber, same process and clock).
func runDrainBenchmark(arguments: [String]) async {
    let events = intOption(arguments, "--events", 12_000)
    let rate = intOption(arguments, "--rate", 200)
    print("drain: \(events) backlog events at \(rate) events/s, live fixes at 10 Hz meanwhile")
    do {
        try await measureDrain(events: events, rate: rate)
    } catch {
        print("drain: failed: \(error)")
    }
}

private func measureDrain(events: Int, rate: Int) async throws {
    let logger = Logger(label: "fleetcast-bench") { _ in SwiftLogNoOpLogHandler() }
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-drain")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let vehicle = VehicleID("bench-1")!
    let start = Int64(1_763_880_000_000)
    func fix(_ ms: Int64, _ index: Int) -> Fix {
        Fix(
            time: UTCTimestamp(millisecondsSince1970: ms), latitude: 52.37 + Double(index) * 1e-6, longitude: 4.89,
            altitudeHAE: 45, speed: 13.9, track: 87.5, mode: .threeD, quality: .gps, satellitesUsed: 11, hdop: 0.8)
    }

    // The outage: everything goes to the store.
    let absent = SwitchableSender()
    var outageSettings = Publisher.Settings(vehicle: vehicle)
    outageSettings.drainTimeout = .milliseconds(200)
    let first = Publisher(
        settings: outageSettings, sender: absent,
        store: await OutboxStore.open(directory: directory, vehicle: vehicle, logger: logger), logger: logger)
    let firstRun = Task { await first.run() }
    for index in 0..<(events / 2) {
        let ms = start + Int64(index) * 100
        first.publish(.fix(fix(ms, index)))
        first.publish(.heading(Heading(time: UTCTimestamp(millisecondsSince1970: ms), trueHeading: 87.5, source: .hdt)))
        if index % 500 == 499 { await Task.yield() }
    }
    first.finish()
    await firstRun.value

    let broker = try await BenchBroker.start(inflight: 100)
    let url = try BrokerURL(parsing: broker.url)
    let watcher = try MQTTClient(configuration: MQTTConfiguration(broker: url, clientID: "bench-drain-watch"), logger: logger)
    try await watcher.connect()
    let subscription = try await watcher.subscribe(["fleet/bench-1/#"], qos: .atLeastOnce)
    let sentAt = Locked<[Int64: ContinuousClock.Instant]>([:])
    let clock = ContinuousClock()
    let liveStart = start + Int64(events / 2) * 100 + 60_000
    let receiving = Task { () -> (drained: ContinuousClock.Instant?, latencies: [Duration], backlog: Int) in
        var backlog = 0
        var latencies: [Duration] = []
        var drained: ContinuousClock.Instant?
        do {
            for try await message in subscription {
                let now = clock.now
                if message.topic.hasSuffix("/backlog") {
                    backlog += (try? FleetPayload.decodeBacklog(message.payload, vehicle: vehicle))?.events.count ?? 0
                    if backlog >= events, drained == nil { drained = now }
                } else if message.topic.hasSuffix("/fix"), let decoded = try? FleetPayload.decodeFix(message.payload, vehicle: vehicle),
                    let sent = sentAt.withLock({ $0[decoded.fix.time.millisecondsSince1970] }), drained == nil
                {
                    latencies.append(sent.duration(to: now))
                }
                if drained != nil { break }
            }
        } catch {}
        return (drained, latencies, backlog)
    }

    let link = MQTTLink(
        configuration: MQTTConfiguration(broker: url, clientID: "bench-drain-agent"), messageExpirySeconds: nil, logger: logger)
    try await link.connect(will: nil)
    var drainSettings = Publisher.Settings(vehicle: vehicle)
    drainSettings.drainRate = rate
    let second = Publisher(
        settings: drainSettings, sender: link,
        store: await OutboxStore.open(directory: directory, vehicle: vehicle, logger: logger), logger: logger)
    let secondRun = Task { await second.run() }
    let drainStart = clock.now
    let live = Task {
        var index = 0
        while !Task.isCancelled {
            let ms = liveStart + Int64(index) * 100
            sentAt.withLock { $0[ms] = clock.now }
            second.publish(.fix(fix(ms, index)))
            index += 1
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    let timeout = Task {
        try? await Task.sleep(for: .seconds(Double(events) / Double(rate) * 3 + 30))
        await watcher.shutdown()
    }
    let result = await receiving.value
    live.cancel()
    timeout.cancel()
    second.finish()
    await secondRun.value
    _ = await link.shutdown(flushTimeout: .seconds(1), timeout: .seconds(2))
    await watcher.shutdown()
    await broker.shutdown()

    guard let drained = result.drained else {
        print("  not drained: \(result.backlog) of \(events) backlog events arrived")
        return
    }
    let sorted = result.latencies.sorted()
    func percentile(_ p: Double) -> String {
        guard !sorted.isEmpty else { return "-" }
        let d = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        return String(format: "%.2f ms", Double(d.components.attoseconds) * 1e-15 + Double(d.components.seconds) * 1000)
    }
    let took = drainStart.duration(to: drained)
    print(
        String(
            format: "  drained %d events in %.1f s (%.0f events/s); %d live fixes meanwhile: latency p50 %@, p99 %@, max %@",
            result.backlog, Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18,
            Double(result.backlog) / (Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18),
            sorted.count, percentile(0.5), percentile(0.99), percentile(1.0)))
}

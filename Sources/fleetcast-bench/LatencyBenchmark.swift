import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT
import Synchronization

/// `fleetcast-bench latency [--seconds S] [--runs R] [--warmup S] [--agent PATH]`
///
/// Serial-to-subscriber latency of the real agent binary. A pseudo-terminal stands for the
/// receiver: the agent runs with `--source serial:/dev/pts/N?baud=115200` against a mosquitto
/// on a free loopback port; our `MQTTClient`, in this process, holds a QoS 1 subscription to
/// `fleet/lat/fix`. Every 100 ms for S seconds (default 60) the bench writes one epoch of a
/// 10 Hz vehicle (``NMEASentenceGenerator``: RMC GGA GSA VTG HDT GST, GST last — the cycle
/// ender the decoder learns after the first cycle) in one `write`, and records the monotonic
/// instant after that write returned; the subscriber records when the fix with that `time`
/// arrived. Epochs of the first `--warmup` seconds (default 2) are discarded. Prints count,
/// missing fixes, and p50 / p90 / p99 / max in milliseconds per run (R runs, default 3).
func runLatencyBenchmark(arguments: [String]) async {
    let seconds = intOption(arguments, "--seconds", 60)
    let runs = intOption(arguments, "--runs", 3)
    let warmupSeconds = Int(stringOption(arguments, "--warmup", "2")) ?? 2
    let agent = agentExecutable(arguments)
    guard FileManager.default.isExecutableFile(atPath: agent) else {
        print("latency: no fleetcast-agent at \(agent) (build it next to the bench, or pass --agent PATH)")
        return
    }
    print("latency: load average \(loadAverage()) (1, 5, 15 min); agent \(agent)")
    var p99s: [Double] = []
    var p50s: [Double] = []
    for run in 1...runs {
        do {
            let result = try await measureLatency(agent: agent, epochs: seconds * 10, warmupEpochs: warmupSeconds * 10, run: run)
            let l = result.latencies.sorted()
            let line =
                "count \(l.count), missing \(result.missing), p50 \(ms(percentile(l, 50))), "
                + "p90 \(ms(percentile(l, 90))), p99 \(ms(percentile(l, 99))), max \(ms(l.last ?? 0)) ms"
            print("latency: run \(run): \(line)")
            if result.missing > 0 || result.agentStatus != 0 {
                print("latency:   agent exit status \(result.agentStatus); output: \(result.agentOutput)")
            }
            p99s.append(percentile(l, 99))
            p50s.append(percentile(l, 50))
        } catch {
            print("latency: run \(run) failed: \(error)")
        }
    }
    guard !p99s.isEmpty else { return }
    print(
        "latency: p50 median \(ms(median(p50s))) ms; p99 median \(ms(median(p99s))) ms, best \(ms(p99s.min() ?? 0)) ms, worst \(ms(p99s.max() ?? 0)) ms (goal p99 < 5 ms)"
    )
    print("latency: load average \(loadAverage()) (1, 5, 15 min)")
}

/// What one latency run measured.
private struct LatencyResult {
    /// Write-to-arrival times of the epochs after the warm-up, milliseconds.
    var latencies: [Double]
    /// Epochs after the warm-up whose fix never arrived.
    var missing: Int
    var agentStatus: Int32
    var agentOutput: String
}

private func measureLatency(agent: String, epochs count: Int, warmupEpochs: Int, run: Int) async throws -> LatencyResult {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-latency")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let pty = try PseudoTerminal()
    defer { pty.close() }

    let broker = try await BenchBroker.start(inflight: 100)
    let logger = Logger(label: "fleetcast-bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let client: MQTTClient
    do {
        client = try MQTTClient(
            configuration: MQTTConfiguration(broker: try BrokerURL(parsing: broker.url), clientID: "fleetcast-bench-latency"),
            logger: logger)
        try await client.connect()
    } catch {
        await broker.shutdown()
        throw error
    }
    let vehicle = "lat"
    let subscription: MQTTSubscription
    do {
        subscription = try await client.subscribe(["fleet/\(vehicle)/fix"], qos: .atLeastOnce)
    } catch {
        await client.shutdown()
        await broker.shutdown()
        throw error
    }

    // Epoch times from the wall clock, on a 100 ms grid, as a live receiver's would be.
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let startMilliseconds = (Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000) / 100 * 100 + 100
    let epochs = SyntheticDrive.epochs(count: count, start: UTCTimestamp(millisecondsSince1970: startMilliseconds), rateHz: 10)
    let lastTime = epochs.last?.time.millisecondsSince1970 ?? 0

    // The receiver: the first arrival of each fix time, until the last epoch's fix is in.
    let receiving = Task { () -> [Int64: ContinuousClock.Instant] in
        var arrivals: [Int64: ContinuousClock.Instant] = [:]
        arrivals.reserveCapacity(count)
        let clock = ContinuousClock()
        do {
            for try await message in subscription {
                let arrived = clock.now
                guard let decoded = try? FleetPayload.decodeFix(message.payload, vehicle: nil) else { continue }
                let time = decoded.fix.time.millisecondsSince1970
                if arrivals[time] == nil { arrivals[time] = arrived }
                if time == lastTime { break }
            }
        } catch {
            // The client shut down: return what arrived.
        }
        return arrivals
    }

    let state = "\(directory)/state"
    try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
    let configuration = "\(directory)/agent.yaml"
    try "log:\n  level: warning\n".write(toFile: configuration, atomically: true, encoding: .utf8)
    let process: TestProcess
    do {
        process = try TestProcess(
            agent,
            [
                "run", "--source", "serial:\(pty.path)?baud=115200", "--vehicle", vehicle, "--broker", broker.url,
                "--state-dir", state, "--config", configuration,
            ],
            directory: directory, name: "agent-\(run)", environment: agentEveryFixEnvironment)
    } catch {
        receiving.cancel()
        await client.shutdown()
        await broker.shutdown()
        throw error
    }

    // The writer: one epoch every 100 ms on a fixed schedule.
    let clock = ContinuousClock()
    let scheduleStart = clock.now.advanced(by: .milliseconds(100))
    var written: [(time: Int64, at: ContinuousClock.Instant)] = []
    written.reserveCapacity(count)
    for (k, epoch) in epochs.enumerated() {
        try? await clock.sleep(until: scheduleStart.advanced(by: .milliseconds(100 * k)), tolerance: .zero)
        pty.write(SyntheticDrive.bytes(epoch))
        written.append((epoch.time.millisecondsSince1970, clock.now))
    }
    let watchdog = Task {
        try await Task.sleep(for: .seconds(2))
        receiving.cancel()
    }
    let arrivals = await receiving.value
    watchdog.cancel()

    let status = await process.stop()
    let output = (process.standardOutput + process.standardError).split(separator: "\n").suffix(6).joined(separator: "\n")
    await client.shutdown()
    await broker.shutdown()

    var latencies: [Double] = []
    var missing = 0
    for entry in written.dropFirst(warmupEpochs) {
        if let arrived = arrivals[entry.time] {
            latencies.append((arrived - entry.at).milliseconds)
        } else {
            missing += 1
        }
    }
    return LatencyResult(latencies: latencies, missing: missing, agentStatus: status, agentOutput: output)
}

/// The `p`-th percentile (nearest rank) of sorted `values`; 0 when empty.
private func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

private func ms(_ value: Double) -> String {
    fixed(value, 3)
}

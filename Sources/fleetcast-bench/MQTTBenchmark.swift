import FleetcastTestSupport
import Foundation
import Logging
import MQTT

/// `fleetcast-bench mqtt [--count N] [--runs R] [--python PATH]`: publish rate at QoS 0 and
/// QoS 1 of our `MQTTClient` and of paho-mqtt (`deploy/bench/paho_publish.py`), side by side
/// against the same freshly started mosquitto, with the same 200-byte payload (the size of a
/// fix JSON) and the same window of 100 messages in flight. R rounds (default 3), each running
/// both clients at both QoS levels in turn; prints every round, the medians and their ratio
/// (a loaded two-core machine moves single rounds by ±20 %).
func runMQTTBenchmark(arguments: [String]) async {
    let count = intOption(arguments, "--count", 20_000)
    let runs = max(1, intOption(arguments, "--runs", 3))
    let python = stringOption(arguments, "--python", "python3")
    let logger = Logger(label: "fleetcast-bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let payload = [UInt8](repeating: UInt8(ascii: "x"), count: 200)
    let broker: BenchBroker
    do {
        broker = try await BenchBroker.start(inflight: 100)
    } catch {
        print("mqtt: cannot start mosquitto: \(error)")
        return
    }
    defer { Task { await broker.shutdown() } }
    let payloadFile = "\(broker.directory)/payload.bin"
    _ = FileManager.default.createFile(atPath: payloadFile, contents: Data(payload))
    print("mqtt publish: \(count) messages of \(payload.count) bytes, 100 in flight, \(runs) rounds, mosquitto on \(broker.url)")
    var ours: [MQTTQoS: [Double]] = [:]
    var paho: [MQTTQoS: [Double]] = [:]
    for round in 1...runs {
        for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
            let rate = await fleetcastRate(broker: broker, qos: qos, count: count, payload: payload, logger: logger)
            let baseline = await pahoRate(python: python, broker: broker, qos: qos.rawValue, count: count, payloadFile: payloadFile)
            if let rate { ours[qos, default: []].append(rate) }
            if let baseline { paho[qos, default: []].append(baseline) }
            print(
                String(
                    format: "  round %d  qos%d  fleetcast %8.0f msg/s   paho-mqtt %@ msg/s",
                    round, qos.rawValue, rate ?? 0, baseline.map { String(format: "%8.0f", $0) } ?? "     n/a"))
        }
    }
    for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
        let mine = ours[qos].map(median), theirs = paho[qos].map(median)
        let ratio = (mine != nil && theirs != nil) ? String(format: "%.1fx", mine! / theirs!) : "n/a"
        print(
            String(
                format: "  qos%d  median  fleetcast %8.0f msg/s   paho-mqtt %@ msg/s   ratio %@",
                qos.rawValue, mine ?? 0, theirs.map { String(format: "%8.0f", $0) } ?? "     n/a", ratio))
    }
}

/// One round of our client: `count` publishes, at most 100 awaiting their acknowledgement;
/// messages per second, or `nil` (with a note) when it failed.
private func fleetcastRate(broker: BenchBroker, qos: MQTTQoS, count: Int, payload: [UInt8], logger: Logger) async -> Double? {
    do {
        let configuration = MQTTConfiguration(
            broker: try BrokerURL(parsing: broker.url), clientID: "fleetcast-bench-\(qos.rawValue)", maxInflightMessages: 100)
        let client = try MQTTClient(configuration: configuration, logger: logger)
        try await client.connect()
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                if index >= 100 { try await group.next() }
                // As the agent's publisher does: runs synchronously up to the acknowledgement wait.
                group.addImmediateTask { try await client.publish(topic: "bench/fleetcast/fix", payload: payload, qos: qos) }
            }
            try await group.waitForAll()
        }
        let elapsed = seconds(clock.now - started)
        await client.shutdown()
        return Double(count) / elapsed
    } catch {
        print("  qos\(qos.rawValue) fleetcast: failed: \(error)")
        return nil
    }
}

/// Runs the paho-mqtt baseline; `nil` (with a note) when Python or paho-mqtt is missing.
private func pahoRate(python: String, broker: BenchBroker, qos: Int, count: Int, payloadFile: String) async -> Double? {
    do {
        let process = try TestProcess(
            "/usr/bin/env",
            [
                python, "deploy/bench/paho_publish.py", "127.0.0.1", "\(broker.port)", "\(qos)", "\(count)", payloadFile,
            ], directory: broker.directory, name: "paho-\(qos)")
        let status = try await process.waitForExit(timeout: .seconds(300))
        guard status == 0, let line = process.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix("messages/s ") }),
            let rate = Double(line.dropFirst("messages/s ".count))
        else {
            print("  paho-mqtt skipped (pip install paho-mqtt; run from the repository root): \(process.standardError.prefix(200))")
            return nil
        }
        return rate
    } catch {
        print("  paho-mqtt skipped: \(error)")
        return nil
    }
}

private func seconds(_ duration: Duration) -> Double {
    let c = duration.components
    return Double(c.seconds) + Double(c.attoseconds) / 1e18
}

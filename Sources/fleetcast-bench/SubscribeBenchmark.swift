import FleetcastTestSupport
import Foundation
import Logging
import MQTT

/// `fleetcast-bench subscribe [--filters N] [--runs R] [--rtt-ms MS]`: how long one `subscribe` call with N
/// filters (default 1,000, one per vehicle: `fleet/v-<i>/fix`) takes to return, that is until
/// the broker has acknowledged every filter, over MQTT 5 and MQTT 3.1.1, against a freshly
/// started mosquitto on loopback. On MQTT 5 each filter is its own SUBSCRIBE (it carries the
/// filter's subscription identifier), so the figure shows whether they go out one round trip
/// at a time or together. R rounds (default 5); prints each and the median. With `--rtt-ms`,
/// the client reaches the broker through `deploy/bench/delay_proxy.py`, which delays each
/// direction by half of it (a vehicle on a cellular link; loopback's round trip is ~0.1 ms, so
/// there the broker's own work dominates).
func runSubscribeBenchmark(arguments: [String]) async {
    let filterCount = max(1, intOption(arguments, "--filters", 1_000))
    let runs = max(1, intOption(arguments, "--runs", 5))
    let rtt = max(0, intOption(arguments, "--rtt-ms", 0))
    let logger = Logger(label: "fleetcast-bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let broker: BenchBroker
    do {
        broker = try await BenchBroker.start(inflight: 100)
    } catch {
        print("subscribe: cannot start mosquitto: \(error)")
        return
    }
    defer { Task { await broker.shutdown() } }
    var proxy: TestProcess?
    var url = broker.url
    if rtt > 0 {
        do {
            let port = try FreePort.next()
            let script = FileManager.default.currentDirectoryPath + "/deploy/bench/delay_proxy.py"
            let started = try TestProcess(
                "/usr/bin/env",
                [
                    "python3", script, "\(port)", "\(broker.port)", "\(Double(rtt) / 2)",
                ], directory: broker.directory, name: "delay-proxy")
            proxy = started
            try await waitUntil("the delaying proxy to listen", timeout: .seconds(10)) {
                guard started.isRunning else {
                    throw TestSupportError.processFailed(started.commandLine, status: -1, output: started.standardError)
                }
                return FreePort.isAccepting(port)
            }
            url = "mqtt://127.0.0.1:\(port)"
        } catch {
            print("subscribe: cannot start deploy/bench/delay_proxy.py (run from the package root): \(error)")
            return
        }
    }
    defer { proxy?.send(SIGKILL) }
    let filters = (0..<filterCount).map { "fleet/v-\($0)/fix" }
    print(
        "mqtt subscribe: \(filterCount) filters in one subscribe call, \(runs) rounds, mosquitto on \(broker.url)"
            + (rtt > 0 ? ", reached through a proxy adding \(rtt) ms of round trip" : ""))
    for version in [MQTTProtocolVersion.v5, .v311] {
        var times: [Double] = []
        for round in 1...runs {
            do {
                let configuration = MQTTConfiguration(
                    broker: try BrokerURL(parsing: url), clientID: "fleetcast-bench-subscribe-\(round)",
                    protocolVersion: version)
                let client = try MQTTClient(configuration: configuration, logger: logger)
                try await client.connect()
                let clock = ContinuousClock()
                let started = clock.now
                let subscription = try await client.subscribe(filters)
                let elapsed = clock.now - started
                let c = elapsed.components
                let milliseconds = (Double(c.seconds) + Double(c.attoseconds) / 1e18) * 1000
                times.append(milliseconds)
                print(String(format: "  round %d  %@  %8.1f ms", round, "\(version)", milliseconds))
                withExtendedLifetime(subscription) {}
                await client.shutdown()
            } catch {
                print("  round \(round) \(version): failed: \(error)")
            }
        }
        if !times.isEmpty {
            print(String(format: "  %@  median %8.1f ms for %d filters", "\(version)", median(times), filterCount))
        }
    }
}

import FleetcastTestSupport
import Foundation
import Logging
import MQTT

/// One timed run of a publishing process (the agent or the Python bridge) against a
/// ``BenchBroker``, with our `MQTTClient` counting the fixes on `topic` in this process.
struct BenchRun: Sendable {
    /// What was counted.
    var counter: FixCounter
    /// The process's exit status (`nil`: it had to be killed after the time limit).
    var exitStatus: Int32?
    /// From starting the process until the last fix arrived and the process had exited.
    var elapsed: Duration
    /// The last lines of the process's stdout and stderr, for reports.
    var output: String
    /// The CPU time the process used (user, system); `nil` if it could not be read.
    var cpuTime: (user: Duration, system: Duration)?

    /// The elapsed time in seconds.
    var seconds: Double { elapsed.seconds }

    /// Subscribes (with `counterQoS`) to `topic`, then starts `executable` and measures until `expected`
    /// distinct fixes have arrived and the process has exited. A process still running after
    /// `timeout` is killed; fixes still missing 10 s after the exit are reported missing.
    static func measure(
        executable: String, arguments: [String], name: String, directory: String,
        broker: BenchBroker, topic: String, counterQoS: MQTTQoS, expected: Int, timeout: Duration
    ) async throws -> BenchRun {
        let logger = Logger(label: "fleetcast-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = MQTTConfiguration(
            broker: try BrokerURL(parsing: broker.url), clientID: "fleetcast-bench-\(name)", maxInflightMessages: 100)
        let client = try MQTTClient(configuration: configuration, logger: logger)
        try await client.connect()
        let subscription = try await client.subscribe([topic], qos: counterQoS)
        let counting = Task { await FixCounter.count(subscription, expected: expected) }

        let clock = ContinuousClock()
        let start = clock.now
        let process: TestProcess
        do {
            process = try TestProcess(executable, arguments, directory: directory, name: name)
        } catch {
            counting.cancel()
            await client.shutdown()
            throw error
        }
        let killer = Task { [pid = process.pid] () -> Bool in
            do { try await Task.sleep(for: timeout) } catch { return false }
            kill(pid, SIGKILL)
            return true
        }
        let status = await process.waitForExit()
        let exited = clock.now
        killer.cancel()
        let killed = await killer.value
        // The last fixes may still be on their way through the broker.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            counting.cancel()
        }
        let counter = await counting.value
        watchdog.cancel()
        await client.shutdown()
        let end = max(exited, counter.lastArrival ?? exited)
        let output = (process.standardOutput + process.standardError)
            .split(separator: "\n").suffix(6).joined(separator: "\n")
        return BenchRun(
            counter: counter, exitStatus: killed ? nil : status, elapsed: end - start, output: output, cpuTime: process.cpuTime)
    }
}

extension Duration {
    /// This duration in seconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }

    /// This duration in milliseconds.
    var milliseconds: Double { seconds * 1000 }
}

/// The 1-minute, 5-minute and 15-minute load averages from `/proc/loadavg`, as `uptime` shows them.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: ", ")
}

/// The path of the `fleetcast-agent` binary: `--agent PATH` if given, else the one built next
/// to this benchmark (so a release bench runs the release agent).
func agentExecutable(_ arguments: [String]) -> String {
    if let i = arguments.firstIndex(of: "--agent"), i + 1 < arguments.count { return arguments[i + 1] }
    return builtProduct("fleetcast-agent")
}

/// The integer value after `name` in `arguments`, or `fallback`.
func intOption(_ arguments: [String], _ name: String, _ fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]), v > 0 else {
        return fallback
    }
    return v
}

/// The text value after `name` in `arguments`, or `fallback`.
func stringOption(_ arguments: [String], _ name: String, _ fallback: String) -> String {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return fallback }
    return arguments[i + 1]
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// `value` with `decimals` decimals.
func fixed(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

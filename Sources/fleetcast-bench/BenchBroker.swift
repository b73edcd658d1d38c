import FleetcastTestSupport
import Foundation

/// A real `/usr/sbin/mosquitto` for one benchmark: a free loopback port, anonymous access,
/// `user root`, persistence off, errors and warnings only in its log (a per-message debug log
/// would make the broker's disk writes part of what is measured), a large queue per client
/// (`max_queued_messages`) so that no QoS 1 message to a slow subscriber is dropped, and
/// `max_inflight_messages` per client as given. Started by ``start(inflight:)``, stopped and its
/// directory removed by ``shutdown()``.
final class BenchBroker: Sendable {
    /// The loopback port it listens on.
    let port: Int
    /// Its temp directory (configuration and log).
    let directory: String
    private let process: TestProcess

    private init(port: Int, directory: String, process: TestProcess) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// `mqtt://127.0.0.1:PORT`.
    var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts mosquitto and waits (up to 10 s) until it accepts connections.
    static func start(inflight: Int) async throws -> BenchBroker {
        let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-broker")
        do {
            let port = try FreePort.next()
            let lines = [
                "user root",
                "persistence false",
                "log_dest stderr",
                "log_type error",
                "log_type warning",
                "listener \(port) 127.0.0.1",
                "allow_anonymous true",
                "max_queued_messages 10000000",
                "max_inflight_messages \(inflight)",
            ]
            let configuration = "\(directory)/mosquitto.conf"
            try (lines.joined(separator: "\n") + "\n").write(toFile: configuration, atomically: true, encoding: .utf8)
            let process = try TestProcess("/usr/sbin/mosquitto", ["-c", configuration], directory: directory, name: "mosquitto")
            try await waitUntil("mosquitto to accept connections on port \(port)", timeout: .seconds(10)) {
                guard process.isRunning else {
                    throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
                }
                return FreePort.isAccepting(port)
            }
            return BenchBroker(port: port, directory: directory, process: process)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// Stops mosquitto (SIGTERM, then SIGKILL) and removes its directory.
    func shutdown() async {
        await process.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

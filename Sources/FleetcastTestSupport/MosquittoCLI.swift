import Foundation

/// Runs the mosquitto command-line clients against a ``TestBroker`` and collects their output.
public enum MosquittoCLI {
    /// Publishes one message with `mosquitto_pub` and waits for it to finish.
    public static func publish(
        broker: TestBroker, topic: String, message: String, qos: Int = 1, retain: Bool = false, extra: [String] = []
    ) async throws {
        var arguments = ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", topic, "-m", message, "-q", "\(qos)"]
        if retain { arguments.append("-r") }
        try await TestBroker.runTool("/usr/bin/mosquitto_pub", arguments + extra, in: broker.directory)
    }

    /// How a client run ended: its exit status and what it wrote to stderr.
    public struct Outcome: Sendable {
        /// The exit status (0: success; `mosquitto_pub` exits with the MQTT 5 CONNACK reason
        /// code, e.g. 135 for 0x87 not authorized, or 5 for MQTT 3.1.1's "not authorised").
        public var status: Int32
        /// Its stderr (`Warning: Publish 1 failed: Not authorized.` for a refused MQTT 5 publish).
        public var errorOutput: String
    }

    /// Publishes one message with `mosquitto_pub` and returns how it ended, success or not: for
    /// tests of what a broker refuses (a connection without credentials, a topic its ACL
    /// forbids). Throws only when it cannot be run or takes longer than `timeout`.
    public static func attemptPublish(
        broker: TestBroker, topic: String, message: String, qos: Int = 1, extra: [String] = [], timeout: Duration = .seconds(30)
    ) async throws -> Outcome {
        let name = "mosquitto_pub-\(UUID().uuidString.prefix(8))"
        let process = try TestProcess(
            "/usr/bin/mosquitto_pub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", topic, "-m", message, "-q", "\(qos)",
            ] + extra, directory: broker.directory, name: name)
        let status = try await process.waitForExitOrStop(timeout: timeout)
        return Outcome(status: status, errorOutput: process.standardError)
    }

    /// `mosquitto_sub` arguments that print each message as `topic hex-of-payload`: for binary
    /// payloads (a compact batch), which would otherwise break the output's lines. Read such a
    /// line with ``hexMessage(_:)``.
    public static let hexOutput = ["-F", "%t %x"]

    /// The topic and payload of a line printed with ``hexOutput``; `nil` for anything else.
    public static func hexMessage(_ line: some StringProtocol) -> (topic: String, payload: [UInt8])? {
        guard let space = line.firstIndex(of: " ") else { return nil }
        let hex = Array(line[line.index(after: space)...].utf8)
        guard hex.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var payload: [UInt8] = []
        payload.reserveCapacity(hex.count / 2)
        for index in stride(from: 0, to: hex.count, by: 2) {
            guard let high = nibble(hex[index]), let low = nibble(hex[index + 1]) else { return nil }
            payload.append(high << 4 | low)
        }
        return (String(line[..<space]), payload)
    }

    /// Starts `mosquitto_sub` on `filter` for `count` messages, returning once its SUBACK
    /// has arrived (so anything published afterwards reaches it).
    ///
    /// - Parameter loggedAs: the client id the broker's log names it by, when the broker makes
    ///   its own (`use_username_as_clientid`: the user name); by default the random one it sends.
    public static func subscribe(
        broker: TestBroker, filter: String, count: Int, timeoutSeconds: Int = 20, extra: [String] = [], loggedAs: String? = nil
    ) async throws -> Subscriber {
        let clientID = "cli-sub-\(UUID().uuidString.prefix(8))"
        let process = try TestProcess(
            "/usr/bin/mosquitto_sub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-i", clientID, "-t", filter, "-C", "\(count)",
                "-W", "\(timeoutSeconds)", "-v", "-q", "1",
            ] + extra, directory: broker.directory, name: "mosquitto_sub-\(clientID)")
        // The broker's log (log_type all) says when it acknowledged the subscription.
        let logged = loggedAs ?? clientID
        try await waitUntil("mosquitto_sub to be subscribed to \(filter)") {
            if !process.isRunning { throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError) }
            return broker.log.contains("Sending SUBACK to \(logged)")
        }
        return Subscriber(process: process, timeoutSeconds: timeoutSeconds)
    }

    /// The message retained on `topic` (as a `topic payload` line), read by a `mosquitto_sub`
    /// that connects, takes one message and exits; `nil` when nothing is retained there.
    /// `extra`: more arguments (TLS, credentials).
    public static func retained(broker: TestBroker, topic: String, timeoutSeconds: Int = 5, extra: [String] = []) async throws -> String? {
        let process = try TestProcess(
            "/usr/bin/mosquitto_sub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", topic, "-C", "1", "-W", "\(timeoutSeconds)", "-v",
            ] + extra, directory: broker.directory, name: "mosquitto_sub-retained-\(UUID().uuidString.prefix(8))")
        _ = try await process.waitForExit(timeout: .seconds(timeoutSeconds + 5))
        return process.standardOutput.split(separator: "\n").first.map(String.init)
    }

    /// A running `mosquitto_sub`.
    public struct Subscriber: Sendable {
        /// The process.
        public let process: TestProcess
        /// Its `-W` limit in seconds: it exits by itself after this long.
        public let timeoutSeconds: Int

        /// The messages received so far as `topic payload` lines (complete lines only), so
        /// a test can poll for the message it expects and then ``stop()``.
        public var messagesSoFar: [String] {
            var output = process.standardOutput
            if let lastNewline = output.lastIndex(of: "\n") {
                output = String(output[...lastNewline])
            } else {
                output = ""
            }
            return output.split(separator: "\n").map(String.init)
        }

        /// Waits for `mosquitto_sub` to exit (after its message count or its `-W` limit) and
        /// returns the received messages as `topic payload` lines. The wait is bounded by
        /// `timeout` (by default the `-W` limit plus 10 s): a subscriber still running then is
        /// stopped (SIGTERM, then SIGKILL) and what had arrived is returned, so that the
        /// test's expectation on the content fails instead of hanging.
        public func messages(timeout: Duration? = nil) async -> [String] {
            let limit = timeout ?? .seconds(timeoutSeconds + 10)
            _ = try? await process.waitForExitOrStop(timeout: limit)
            return process.standardOutput.split(separator: "\n").map(String.init)
        }

        /// Stops it early (SIGTERM, then SIGKILL).
        public func stop() async { await process.stop() }
    }
}

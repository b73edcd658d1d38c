import Foundation

/// A real amqtt broker (PyPI's `amqtt`, pinned and installed by the test command into
/// `.build/amqtt`) on a loopback port, anonymous logins allowed: a Python broker that speaks
/// MQTT 3.1.1 only, and answers an MQTT 5 CONNECT by closing the connection after 10 s,
/// without a CONNACK. ``shutdown()`` stops it and deletes its directory; `deinit` kills it.
public final class TestAMQTT: Sendable {
    /// The MQTT port.
    public let port: Int
    /// The directory with its configuration and log.
    public let directory: String
    private let process: TestProcess

    /// `mqtt://127.0.0.1:<port>`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// The `amqtt` the test command installed: `$FLEETCAST_AMQTT`, else `.build/amqtt/bin/amqtt`
    /// in the checkout.
    public static var executable: String {
        if let given = ProcessInfo.processInfo.environment["FLEETCAST_AMQTT"], !given.isEmpty { return given }
        return RepositoryPath.of(".build/amqtt/bin/amqtt")
    }

    /// Whether the broker is installed (the README's test command installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    private init(port: Int, directory: String, process: TestProcess) {
        (self.port, self.directory, self.process) = (port, directory, process)
    }

    deinit {
        process.send(SIGKILL, toGroup: true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the broker and waits until it accepts connections.
    public static func start() async throws -> TestAMQTT {
        let directory = try makeTemporaryDirectory(prefix: "fleetcast-amqtt")
        let port = try FreePort.next()
        let configuration = """
            listeners:
              default:
                type: tcp
                bind: 127.0.0.1:\(port)
            sys_interval: 0
            auth:
              allow-anonymous: true
              plugins: ['auth_anonymous']
            topic-check:
              enabled: false

            """
        try configuration.write(toFile: "\(directory)/amqtt.yaml", atomically: true, encoding: .utf8)
        let process = try TestProcess(executable, ["-c", "\(directory)/amqtt.yaml"], directory: directory, name: "amqtt")
        let broker = TestAMQTT(port: port, directory: directory, process: process)
        try await waitUntil("amqtt to accept connections on port \(port)", timeout: .seconds(60)) {
            guard process.isRunning else {
                throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
            }
            return FreePort.isAccepting(port)
        }
        return broker
    }

    /// The broker's log so far.
    public var log: String { process.standardError }

    /// Stops the broker (SIGTERM, then SIGKILL) and removes its directory.
    public func shutdown() async {
        _ = await process.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

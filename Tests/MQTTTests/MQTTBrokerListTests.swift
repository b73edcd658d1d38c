import FleetcastTestSupport
import MQTT
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A client given several nodes of one broker service, against real mosquitto brokers and a
/// node that is down or silent: it connects past the dead and the silent ones, and fails over
/// to another node when its own is killed.
@Suite struct MQTTBrokerListTests {
    /// A TCP listener on loopback that never accepts: the kernel completes the handshake, and
    /// nothing ever answers the CONNECT (a node that is up and not serving). Closed by `close`.
    struct SilentListener {
        let fd: Int32
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard let port = bindToFreeLoopbackPort(fd), listen(fd, 8) == 0 else { throw TestSupportError.system("listen", errno) }
            self.fd = fd
            self.port = port
        }

        func close() { _ = Glibc.close(fd) }
    }

    /// The configuration for `nodes` whose first connect tries `first` first (the client id
    /// chooses the first node: the list is turned until its choice is `first`).
    static func configuration(_ nodes: [BrokerURL], first: BrokerURL, id: String) -> MQTTConfiguration {
        var ordered = nodes
        var configuration = MQTTConfiguration(
            broker: ordered[0], otherBrokers: Array(ordered.dropFirst()), clientID: id, reconnect: fastReconnect)
        for _ in nodes where ordered[configuration.firstBrokerIndex] != first {
            ordered = Array(ordered.dropFirst()) + [ordered[0]]
            configuration.broker = ordered[0]
            configuration.otherBrokers = Array(ordered.dropFirst())
        }
        #expect(configuration.brokers[configuration.firstBrokerIndex] == first)
        return configuration
    }

    @Test func aFirstConnectGoesPastADeadNodeAndASilentOne() async throws {
        try await withBroker { broker in
            let live = try BrokerURL(parsing: broker.url)
            let dead = BrokerURL(host: "127.0.0.1", port: try FreePort.next())
            let silent = try SilentListener()
            defer { silent.close() }
            let quiet = BrokerURL(host: "127.0.0.1", port: silent.port)
            var configuration = Self.configuration([dead, quiet, live], first: dead, id: uniqueClientID("list"))
            configuration.connackTimeout = .milliseconds(500)
            let client = try MQTTClient(configuration: configuration, logger: quietLogger)
            // The dead node refuses at once; the silent one is dropped after its CONNACK timeout.
            try await withTimeout(.seconds(10), "the connect past a dead and a silent node") { try await client.connect() }
            #expect(client.protocolVersion == .v5, "mosquitto speaks MQTT 5: auto stays on 5")
            try await client.publish(topic: "list/t", string: "through the live node", qos: .atLeastOnce)
            await client.shutdown()
        }
    }

    @Test func aFirstConnectGoesPastANodeThatRefusesTheLogin() async throws {
        try await withBroker { live in
            // A node whose authentication refuses this client (anonymous, where it wants users).
            try await withBroker(.init(users: ["someone-else": "secret"])) { refusing in
                let good = try BrokerURL(parsing: live.url)
                let bad = try BrokerURL(parsing: refusing.url)
                let configuration = Self.configuration([bad, good], first: bad, id: uniqueClientID("refused"))
                let client = try MQTTClient(configuration: configuration, logger: quietLogger)
                try await withTimeout(.seconds(15), "the connect past a node refusing the login") { try await client.connect() }
                try await client.publish(topic: "list/t", string: "through the node that accepts", qos: .atLeastOnce)
                await client.shutdown()
            }
        }
    }

    @Test func aFirstConnectFailsOnceEveryNodeFailed() async throws {
        let dead = try (0..<3).map { _ in BrokerURL(host: "127.0.0.1", port: try FreePort.next()) }
        let client = try MQTTClient(
            configuration: MQTTConfiguration(broker: dead[0], otherBrokers: Array(dead.dropFirst()), clientID: uniqueClientID("dead")),
            logger: quietLogger)
        await #expect(throws: MQTTError.self) { try await client.connect() }
    }

    @Test func aKilledNodeFailsOverToTheOtherAndQueuedPublishesGoThere() async throws {
        try await withBroker { first in
            try await withBroker { second in
                let a = try BrokerURL(parsing: first.url), b = try BrokerURL(parsing: second.url)
                let client = try MQTTClient(
                    configuration: Self.configuration([a, b], first: a, id: uniqueClientID("fail-over")), logger: quietLogger)
                try await client.connect()
                try await client.publish(topic: "list/before", string: "1", qos: .atLeastOnce)
                let witness = try await MosquittoCLI.subscribe(broker: second, filter: "list/after", count: 1, timeoutSeconds: 30)
                await first.kill()
                // Handed over while the node is gone: sent on the other node once connected.
                try await withTimeout(.seconds(20), "the publish through the other node") {
                    try await client.publish(topic: "list/after", string: "2", qos: .atLeastOnce)
                }
                #expect(await witness.messages() == ["list/after 2"])
                await client.shutdown()
            }
        }
    }
}

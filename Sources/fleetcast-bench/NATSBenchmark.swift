import FleetcastCore
import FleetcastTestSupport
import Logging
import MQTT

/// `fleetcast-bench nats [--count N]`: a 3-node NATS cluster on loopback (JetStream, MQTT
/// streams on all three nodes; the nats-server the test command installs), measured with the
/// MQTT client the agent and fleet-watch use, speaking MQTT 3.1.1 as NATS asks (`auto`):
///
/// - QoS 1 messages per second, 100 in flight, from a publisher to a subscriber on the same
///   node, and from a publisher on one node to a subscriber on another (through the route);
/// - fail-over: a client given all three nodes publishes QoS 1 every 20 ms; its node is
///   killed -9; the time from the kill to the next acknowledged publish, three times.
func runNATSBenchmark(arguments: [String]) async {
    let count = arguments.firstIndex(of: "--count").flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? 20_000
    guard TestNATS.isInstalled else {
        print("nats: nats-server is not installed (bash deploy/test.sh installs it into .build/nats)")
        return
    }
    var logger = Logger(label: "fleetcast-bench")
    logger.logLevel = arguments.contains("--verbose") ? .debug : .warning
    do {
        let single = try await TestNATS.start(nodes: 1)
        let one = try await throughput(publishTo: single.nodes[0], subscribeTo: single.nodes[0], count: count, logger: logger)
        await single.shutdown()
        print("nats: \(count) QoS 1 messages of 100 bytes, 100 in flight, MQTT 3.1.1")
        print(String(format: "  1 node (no cluster):                 %8.0f messages/s delivered", one))
        let cluster = try await TestNATS.start(nodes: 3)
        let same = try await throughput(publishTo: cluster.nodes[0], subscribeTo: cluster.nodes[0], count: count, logger: logger)
        let across = try await throughput(publishTo: cluster.nodes[0], subscribeTo: cluster.nodes[1], count: count, logger: logger)
        print(String(format: "  3 nodes, R3, same node:              %8.0f messages/s delivered", same))
        print(String(format: "  3 nodes, R3, publisher on another:   %8.0f messages/s delivered", across))
        for node in 0..<3 {
            let (connected, acknowledged) = try await failOver(cluster, killing: node, logger: logger)
            print(
                String(
                    format:
                        "  fail-over after node n%d killed -9:   %8.2f s to connected to another node, %.2f s to the next acknowledged publish",
                    node + 1, connected, acknowledged))
            try await cluster.restart(node: node)
            try await cluster.waitUntilAcknowledging(node)
        }
        await cluster.shutdown()
    } catch {
        print("nats: failed: \(error)")
    }
}

/// Messages per second from the first QoS 1 publish to the last one received by a subscriber.
private func throughput(publishTo: TestNATS.Node, subscribeTo: TestNATS.Node, count: Int, logger: Logger) async throws -> Double {
    let payload = [UInt8](repeating: 0x61, count: 100)
    let subscriberClient = try MQTTClient(
        configuration: MQTTConfiguration(broker: try BrokerURL(parsing: subscribeTo.url), clientID: "bench-nats-sub"), logger: logger)
    try await subscriberClient.connect()
    let subscription = try await subscriberClient.subscribe(["bench/nats"], qos: .atLeastOnce)
    let publisher = try MQTTClient(
        configuration: MQTTConfiguration(
            broker: try BrokerURL(parsing: publishTo.url), clientID: "bench-nats-pub", maxInflightMessages: 100), logger: logger)
    try await publisher.connect()
    let clock = ContinuousClock()
    let started = clock.now
    async let received: Int = {
        var n = 0
        for try await _ in subscription {
            n += 1
            if n == count { break }
        }
        return n
    }()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<count {
            if index >= 100 { try await group.next() }
            group.addImmediateTask { try await publisher.publish(topic: "bench/nats", payload: payload, qos: .atLeastOnce) }
        }
        try await group.waitForAll()
    }
    let got = try await received
    let elapsed = clock.now - started
    await publisher.shutdown()
    await subscriberClient.shutdown()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(got) / seconds
}

/// Seconds from killing `node` to the client's next connection (to another node), and to its
/// next acknowledged QoS 1 publish, for a client that was connected to it and was given every
/// node.
private func failOver(_ cluster: TestNATS, killing node: Int, logger: Logger) async throws -> (connected: Double, acknowledged: Double) {
    let urls = try cluster.nodes.map { try BrokerURL(parsing: $0.url) }
    // The node to kill first in the list: the client id chooses the first broker, so rotate
    // the list until the client's first choice is that node.
    var ordered = urls
    var configuration = MQTTConfiguration(broker: ordered[0], otherBrokers: Array(ordered.dropFirst()), clientID: "bench-nats-failover")
    while ordered[configuration.firstBrokerIndex] != urls[node] {
        ordered = Array(ordered.dropFirst()) + [ordered[0]]
        configuration.broker = ordered[0]
        configuration.otherBrokers = Array(ordered.dropFirst())
    }
    let client = try MQTTClient(configuration: configuration, logger: logger)
    try await client.connect()
    try await client.publish(topic: "bench/failover", payload: [1], qos: .atLeastOnce)
    let clock = ContinuousClock()
    let states = client.connectionStates()
    await cluster.kill(node: node)
    let killed = clock.now
    let reconnected = Task {
        var lost = false
        for await state in states {
            if case .connected = state, lost { return clock.now }
            if case .disconnected = state { lost = true }
        }
        return clock.now
    }
    var recovered: ContinuousClock.Instant?
    while recovered == nil, clock.now - killed < .seconds(120) {
        let sent = await withTimeLimit(.seconds(2)) {
            (try? await client.publish(topic: "bench/failover", payload: [1], qos: .atLeastOnce)) != nil
        }
        if sent == true { recovered = clock.now } else { try await Task.sleep(for: .milliseconds(20)) }
    }
    await client.shutdown(flushTimeout: .zero)
    func seconds(_ elapsed: Duration) -> Double {
        Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
    return (seconds(await reconnected.value - killed), seconds((recovered ?? clock.now) - killed))
}

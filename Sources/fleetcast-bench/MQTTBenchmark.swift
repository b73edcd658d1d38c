import Logging
import MQTT

/// `fleetcast-bench mqtt [mqtt://host:port] [count]`: publish rate of `MQTTClient` at QoS 0
/// and QoS 1 against a running broker, with up to 256 publishes awaited at once and a
/// 200-byte payload (the size of a fix JSON). Prints messages per second.
func runMQTTBenchmark(arguments: [String]) async {
    let url = arguments.first ?? "mqtt://127.0.0.1:1883"
    let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
    let logger = Logger(label: "fleetcast-bench", factory: { _ in SwiftLogNoOpLogHandler() })
    let payload = [UInt8](repeating: UInt8(ascii: "x"), count: 200)
    for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
        do {
            let broker = try BrokerURL(parsing: url)
            let configuration = MQTTConfiguration(broker: broker, clientID: "fleetcast-bench-\(qos.rawValue)", maxInflightMessages: 100)
            let client = try MQTTClient(configuration: configuration, logger: logger)
            try await client.connect()
            let clock = ContinuousClock()
            let started = clock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                let window = 256
                for index in 0..<count {
                    if index >= window { try await group.next() }
                    group.addTask { try await client.publish(topic: "bench/fix", payload: payload, qos: qos) }
                }
                try await group.waitForAll()
            }
            let seconds = (clock.now - started).components
            let elapsed = Double(seconds.seconds) + Double(seconds.attoseconds) / 1e18
            await client.shutdown()
            print("mqtt publish qos\(qos.rawValue): \(count) messages in \(elapsed.formatted3) s = \(Int(Double(count) / elapsed)) msg/s")
        } catch {
            print("mqtt publish qos\(qos.rawValue): failed: \(error)")
        }
    }
}

extension Double {
    fileprivate var formatted3: String {
        let thousandths = Int((self * 1000).rounded())
        let fraction = String(thousandths % 1000)
        return "\(thousandths / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}

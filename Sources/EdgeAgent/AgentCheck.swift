import EdgeConfiguration
import FleetProtocol
import FleetcastCore
import GNSS
import GNSSSources
import Logging
import MQTT

/// `fleetcast-agent check`: what a person runs on a new vehicle before enabling the service.
/// Each step says ok, or what failed and what to do: the source gives a position fix, the
/// broker accepts the connection (TLS and credentials included), and the broker lets the
/// vehicle publish: a small non-retained message at QoS 1 on `{prefix}/{vehicle}/check`, a
/// topic outside the contract (no dashboard shows it; a status there would mark a running
/// vehicle offline), read back through a subscription when the ACL allows reading it.
public enum AgentCheck {
    /// One step's outcome.
    public struct Step: Sendable, Equatable {
        /// What was checked (`source`, `broker`, `publish`).
        public var name: String
        /// Whether it passed.
        public var passed: Bool
        /// What was found, and on failure what to do.
        public var detail: String
    }

    /// Runs the steps in order, handing each to `report` as it finishes; returns whether all
    /// passed. The broker steps run even when the source fails (both are worth knowing).
    ///
    /// - Parameter sourceTimeout: how long to wait for the first position fix.
    public static func run(
        configuration: AgentConfiguration, sourceTimeout: Duration, logger: Logger, report: @Sendable (Step) -> Void
    ) async -> Bool {
        let source = await checkSource(configuration, timeout: sourceTimeout, logger: logger)
        report(source)
        let broker = await checkBroker(configuration, logger: logger, report: report)
        return source.passed && broker
    }

    private static func checkSource(_ configuration: AgentConfiguration, timeout: Duration, logger: Logger) async -> Step {
        let uri = configuration.source
        let descriptor: GNSSSourceDescriptor
        do {
            descriptor = try GNSSSourceDescriptor(parsing: uri)
        } catch {
            return Step(name: "source", passed: false, detail: "\(uri): \(error)")
        }
        let source = descriptor.makeSource(uri: uri, logger: logger)
        let started = ContinuousClock.now
        enum Outcome: Sendable { case fix(Fix), noFix(reason: String?), timedOut(reason: String?, sawData: Bool) }
        // What the reader saw, for the verdict when no fix came in time.
        let seen = SanitizerVisibleMutex<(reason: String?, sawData: Bool)>((nil, false))
        let read = await withTimeLimit(timeout) { () -> Outcome in
            for await event in source {
                switch event {
                case .fix(let fix) where fix.mode != .noFix: return .fix(fix)
                case .fix, .heading, .state(.noFix), .state(.streaming): seen.withLock { $0.sawData = true }
                case .state(.reconnecting(let why, _)): seen.withLock { $0.reason = why }
                case .state(.ended): return .noFix(reason: seen.withLock { $0.reason } ?? "the recording has no position fix")
                case .state: break
                }
            }
            return .noFix(reason: seen.withLock { $0.reason })
        }
        let outcome = read ?? seen.withLock { .timedOut(reason: $0.reason, sawData: $0.sawData) }
        let elapsed = started.duration(to: .now)
        switch outcome {
        case .fix(let fix):
            let position = "\(Self.format(fix.latitude))°, \(Self.format(fix.longitude))°"
            return Step(
                name: "source", passed: true,
                detail: "\(uri): \(fix.mode == FixMode.threeD ? "3D" : "2D") fix at \(position) after \(Self.seconds(elapsed))")
        case .noFix(let reason):
            return Step(name: "source", passed: false, detail: "\(uri): \(reason ?? "no position fix")")
        case .timedOut(let reason, let sawData):
            if sawData {
                return Step(
                    name: "source", passed: false,
                    detail: """
                        \(uri): the receiver answers but had no position fix within \(Self.seconds(timeout)); \
                        give its antenna a view of the sky and try again (a cold start can take minutes)
                        """)
            }
            let cause = reason.map { ": \($0)" } ?? ": no data"
            return Step(name: "source", passed: false, detail: "\(uri)\(cause); \(Self.advice(for: descriptor))")
        }
    }

    private static func checkBroker(_ configuration: AgentConfiguration, logger: Logger, report: @Sendable (Step) -> Void) async -> Bool {
        let urls = configuration.broker.urls
        func described(_ url: BrokerURL) -> String {
            "\(url) (TLS \(configuration.usesTLS ? "on" : "off")\(configuration.broker.username.map { ", user \($0)" } ?? ""))"
        }
        // A broker that makes the client id the user name (the shipped configurations) gives a
        // vehicle one connection: this one would close the running agent's, and its last will
        // would mark the vehicle offline. Not while an agent runs, then.
        let busy: String? =
            switch AgentInstanceLock.probe(directory: configuration.stateDirectory, vehicle: configuration.vehicle) {
            case .free: nil
            case .held(let path): "an agent runs for \(configuration.vehicle) (it holds \(path))"
            case .unknown(let path, let reason): "cannot tell whether an agent runs for \(configuration.vehicle) (\(path): \(reason))"
            }
        if let busy {
            report(
                Step(
                    name: "broker", passed: false,
                    detail: """
                        \(urls.map(described).joined(separator: ", ")): not tried: \(busy). A broker that makes the client id the user name \
                        (use_username_as_clientid, as the shipped deploy/mosquitto configurations do) lets a vehicle \
                        have one connection; this check's would close the agent's, and its last will would mark the \
                        vehicle offline. Stop the agent first (systemctl stop fleetcast-agent), and run check as its user or root
                        """))
            return false
        }
        // Each node of the list on its own: a fail-over must find every one of them usable.
        var passed = true
        for url in urls {
            var mqtt = configuration.mqttConfiguration
            mqtt.broker = url
            mqtt.otherBrokers = []
            // Not the agent's client id: on a broker that keeps the client's own, the check does
            // not take the agent's session (and the lock above says whether one runs).
            mqtt.clientID = "fleetcast-check-\(configuration.vehicle)"
            let client: MQTTClient
            do {
                client = try MQTTClient(configuration: mqtt, logger: logger)
                try await client.connect()
            } catch {
                report(Step(name: "broker", passed: false, detail: "\(described(url)): \(error); \(Self.advice(for: error))"))
                passed = false
                continue
            }
            let speaks = client.protocolVersion == .v311 ? "MQTT 3.1.1" : "MQTT 5"
            report(Step(name: "broker", passed: true, detail: "\(described(url)): connected (\(speaks))"))
            let published = await checkPublish(configuration, client: client)
            report(published)
            await client.shutdown(flushTimeout: .seconds(1))
            passed = passed && published.passed
        }
        return passed
    }

    private static func checkPublish(_ configuration: AgentConfiguration, client: MQTTClient) async -> Step {
        let topic = configuration.topics.check(configuration.vehicle)
        let payload = Array("fleetcast-agent check \(UInt64.random(in: 0...UInt64.max))".utf8)
        let subscription = try? await client.subscribe([topic])
        do {
            try await client.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: false)
        } catch {
            return Step(name: "publish", passed: false, detail: "\(topic): \(error); \(Self.advice(for: error))")
        }
        var echoed = false
        if let subscription {
            echoed =
                await withTimeLimit(.seconds(5)) {
                    do {
                        for try await message in subscription where message.payload == payload { return true }
                    } catch {}
                    return false
                } ?? false
        }
        if echoed { return Step(name: "publish", passed: true, detail: "\(topic): accepted and read back") }
        if client.protocolVersion == .v5 {
            // MQTT 5: the broker's PUBACK said yes. A subscription the ACL does not allow
            // reading gets nothing back, which proves nothing either way.
            return Step(name: "publish", passed: true, detail: "\(topic): accepted")
        }
        return Step(
            name: "publish", passed: true,
            detail: """
                \(topic): sent; MQTT 3.1.1 brokers do not say whether their ACL took it, and this one did \
                not let the vehicle read it back: make sure the ACL allows the vehicle's topics
                """)
    }

    private static func advice(for descriptor: GNSSSourceDescriptor) -> String {
        switch descriptor {
        case .serial:
            "check the device path (ls -l /dev/serial/by-id/ /dev/gnss0), the baud rate, and that the user may open it (group dialout)"
        case .gpsd:
            "check that gpsd runs and listens there (systemctl status gpsd; gpspipe -w) and has the receiver (gpsctl)"
        default:
            "check the source URI"
        }
    }

    private static func advice(for error: any Error) -> String {
        guard let error = error as? MQTTError else { return "check broker.url" }
        switch error.code {
        case .connectionRefused, .network: return "check the broker's host and port and that it runs, and the network"
        case .hostNotFound: return "check the host name in broker.url and the vehicle's DNS"
        case .tlsCertificateNotTrusted: return "set broker.caFile to the CA that signed the broker's certificate"
        case .tlsHostnameMismatch: return "use the host name the broker's certificate names in broker.url"
        case .tls: return "check broker.caFile, certFile and keyFile, and that the broker speaks TLS on that port"
        case .badUserNameOrPassword: return "check broker.username and the password file (broker.passwordFile)"
        case .notAuthorized: return "the broker does not let this user in: check its password file or certificate identity"
        case .publishRejected: return "check the broker's ACL allows this vehicle's topics and that the vehicle id is right"
        default: return "check the broker settings"
        }
    }

    private static func format(_ degrees: Double) -> String {
        let scaled = (degrees * 100_000).rounded() / 100_000
        return "\(scaled)"
    }

    private static func seconds(_ duration: Duration) -> String {
        let c = duration.components
        let tenths = Int(c.attoseconds / 100_000_000_000_000_000)
        return "\(c.seconds).\(tenths) s"
    }
}

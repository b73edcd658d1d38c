import FleetProtocol
import FleetcastTestSupport
import Foundation
import Logging
import MQTT
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The broker side as shipped in `deploy/mosquitto/`: mosquitto started from the shipped
/// configuration and ACL (paths substituted, see ``ShippedBroker``), real clients
/// (`mosquitto_pub`, `mosquitto_sub`, the built `fleetcast-agent`) over TLS. A vehicle writes
/// only its own topics, reads no other vehicle's, the watcher reads the whole fleet, and
/// clients without valid credentials are refused; with passwords (`fleetcast.conf`) and with
/// client certificates as identities (`fleetcast-certs.conf`).
///
/// "Nothing arrives" is never a timeout: a subscriber waits for a fixed number of messages,
/// and after what must not reach it comes a message that must; it must get exactly the
/// allowed ones, in order (mosquitto delivers one client's messages in the order it took them).
@Suite("The shipped broker configuration: TLS, identities, per-vehicle ACL", .serialized)
struct BrokerACLTests {
    static let topics = FleetTopics.default
    static let van1 = VehicleID("van-1")!
    static let van2 = VehicleID("van-2")!
    /// Every topic of the contract, for one vehicle.
    static func contractTopics(_ vehicle: VehicleID) -> [String] {
        FleetTopics.Channel.allCases.map { topics.topic(vehicle, $0) }
    }

    /// Where `fleetcast-agent check` publishes its test message and reads it back (outside the
    /// contract; `AgentCheck` names it).
    static let checkTopic = "fleet/van-1/check"

    /// Publishes with MQTT 5 at QoS 1, so that a refusal comes back in the PUBACK.
    static func publish(
        _ shipped: ShippedBroker, as user: String, _ topic: String, _ message: String, retain: Bool = false
    ) async throws -> MosquittoCLI.Outcome {
        try await MosquittoCLI.attemptPublish(
            broker: shipped.broker, topic: topic, message: message, qos: 1,
            extra: shipped.login(user) + ["-V", "mqttv5"] + (retain ? ["-r"] : []))
    }

    /// `mosquitto_pub` says nothing and exits 0 when the broker took the message.
    static func expectAccepted(_ outcome: MosquittoCLI.Outcome, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            outcome.status == 0 && outcome.errorOutput.isEmpty, "\(what): \(outcome.status) \(outcome.errorOutput)",
            sourceLocation: sourceLocation)
    }

    /// A publish the ACL refuses: the MQTT 5 PUBACK says 0x87, which `mosquitto_pub` reports
    /// as a warning (it still exits 0).
    static func expectRefused(_ outcome: MosquittoCLI.Outcome, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            outcome.errorOutput.contains("Publish 1 failed: Not authorized"), "\(what): \(outcome.status) \(outcome.errorOutput)",
            sourceLocation: sourceLocation)
    }

    /// A connection the broker refuses: a non-zero exit and an error on stderr.
    static func expectConnectionRefused(
        _ outcome: MosquittoCLI.Outcome, _ what: String, saying: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            outcome.status != 0 && outcome.errorOutput.contains(saying), "\(what): \(outcome.status) \(outcome.errorOutput)",
            sourceLocation: sourceLocation)
    }

    /// A wait for the agent's messages ran out; the agent's log says why.
    struct AgentWaitFailed: Error, CustomStringConvertible {
        let description: String
    }

    /// ``waitUntil(_:timeout:interval:_:)``, failing with the agent's log.
    static func waitUntil(_ what: String, timeout: Duration, agent: TestProcess, _ condition: () -> Bool) async throws {
        do {
            try await FleetcastTestSupport.waitUntil(what, timeout: timeout, condition)
        } catch {
            throw AgentWaitFailed(description: "\(error); the agent's log:\n\(agent.standardError.suffix(3000))")
        }
    }

    static func json(_ line: String) -> [String: Any]? {
        guard let space = line.firstIndex(of: " ") else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any]
    }

    static func lines(_ lines: [String], on topic: String) -> [String] {
        lines.filter { $0.hasPrefix(topic + " ") }
    }

    /// van-1 writes each of its contract topics (each must be accepted), each of `forbidden`
    /// (each must be refused), then what `alsoTry` tries (the identity's own case), then its last
    /// status; returns what a watcher of `fleet/#`, subscribed first, received: as many
    /// messages as van-1 has topics, and one more.
    static func van1Writes(
        _ shipped: ShippedBroker, refusing forbidden: [String], sourceLocation: SourceLocation = #_sourceLocation,
        alsoTry: () async throws -> Void
    ) async throws -> [String] {
        let own = contractTopics(van1)
        let watcher = try await shipped.subscribe(as: "watch+dispatch", "fleet/#", count: own.count + 1, timeoutSeconds: 30)
        for topic in own {
            expectAccepted(try await publish(shipped, as: "van-1", topic, "van-1 says"), "van-1 → \(topic)", sourceLocation: sourceLocation)
        }
        for topic in forbidden {
            expectRefused(try await publish(shipped, as: "van-1", topic, "van-1 poses"), "van-1 → \(topic)", sourceLocation: sourceLocation)
        }
        try await alsoTry()
        expectAccepted(try await publish(shipped, as: "van-1", topics.status(van1), "last"), "van-1's last", sourceLocation: sourceLocation)
        return await watcher.messages()
    }

    /// A login the broker must refuse: `mosquitto_pub` publishing `message` with the options
    /// `extra` fails to connect, saying `saying` on its stderr.
    struct RefusedLogin {
        let what: String
        let message: String
        let extra: [String]
        let saying: String
    }

    /// Each of `refused` publishes to `topic` and is refused at the connection; then `user`, with
    /// its own login, publishes `accepted` there, and a watcher of `fleet/#` subscribed first
    /// receives that one message and nothing before it.
    static func expectOnly(
        _ user: String, _ accepted: String, on topic: String, refusing refused: [RefusedLogin], _ shipped: ShippedBroker,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let watcher = try await shipped.subscribe(as: "watch+dispatch", "fleet/#", count: 1, timeoutSeconds: 30)
        for login in refused {
            let outcome = try await MosquittoCLI.attemptPublish(
                broker: shipped.broker, topic: topic, message: login.message, extra: login.extra)
            expectConnectionRefused(outcome, login.what, saying: login.saying, sourceLocation: sourceLocation)
        }
        expectAccepted(try await publish(shipped, as: user, topic, accepted), "\(user) \(accepted)", sourceLocation: sourceLocation)
        #expect(await watcher.messages() == ["\(topic) \(accepted)"], sourceLocation: sourceLocation)
    }

    /// Starts the built `fleetcast-agent run` for van-1 on the simulator at 10 Hz, reporting
    /// every fix, connected with `connection` (its broker and credentials), its state in the
    /// test's files.
    static func startAgent(_ shipped: ShippedBroker, _ connection: [String]) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleetcast-agent"),
            ["run", "--source", "sim:?rate=10", "--vehicle", "van-1"] + connection + ["--state-dir", shipped.files.path],
            directory: shipped.files.path, name: "agent", environment: agentEveryFixEnvironment)
    }

    /// Whether the watcher's `received` has van-1 online and at least five of its fixes.
    static func onlineWithFixes(_ received: [String]) -> Bool {
        lines(received, on: "fleet/van-1/status").contains { json($0)?["state"] as? String == "online" }
            && lines(received, on: "fleet/van-1/fix").count >= 5
    }

    /// Stops the agent with SIGTERM: it must exit 0 within 30 s.
    static func expectCleanStop(_ agent: TestProcess, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        agent.send(SIGTERM)
        #expect(
            try await withTimeout(.seconds(30), "the agent to stop") { await agent.waitForExit() } == 0,
            "agent: \(agent.standardError.suffix(3000))", sourceLocation: sourceLocation)
    }

    // MARK: - Passwords (fleetcast.conf)

    @Test(
        "passwords: a vehicle writes its own fix, heading, status, backlog and batch; other vehicles' topics and other topics are refused (MQTT 5: 0x87; MQTT 3.1.1: dropped silently)"
    )
    func vehicleWritesOnlyItsOwnTopics() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            let forbidden =
                Self.contractTopics(Self.van2) + [
                    "fleet/van-2/check", "fleet/van-1/position", "fleet/van-1/fix/extra", "fleet/van-1", "fleet/watch-dispatch/fix",
                ]
            let received = try await Self.van1Writes(shipped, refusing: forbidden) {
                // (That a watcher cannot write a vehicle's topics: BrokerIdentityTests; its attempt here
                // would take the observing watcher's connection, the client id being the user name.)
                // MQTT 3.1.1 has no negative PUBACK: the broker acknowledges and drops the message.
                let silent = try await MosquittoCLI.attemptPublish(
                    broker: shipped.broker, topic: Self.topics.fix(Self.van2), message: "van-1 poses (3.1.1)", qos: 1,
                    extra: shipped.login("van-1") + ["-V", "mqttv311"])
                Self.expectAccepted(silent, "van-1 → van-2's fix with MQTT 3.1.1 (dropped by the broker)")
            }
            let own = Self.contractTopics(Self.van1)
            #expect(
                received == own.map { "\($0) van-1 says" } + ["fleet/van-1/status last"], "broker log:\n\(shipped.broker.log.suffix(4000))")
        }
    }

    @Test(
        "passwords: a vehicle reads no other vehicle's messages, live or retained (it reads back only its own check topic); the watcher reads every vehicle's every topic"
    )
    func vehicleReadsNoOtherVehicle() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            // van-2's last position is retained before anyone subscribes.
            Self.expectAccepted(
                try await Self.publish(shipped, as: "van-2", Self.topics.fix(Self.van2), "retained", retain: true), "van-2's retained fix")

            // One connection as van-1 (the broker allows a vehicle one: its client id is the user
            // name) that subscribes and later publishes. mosquitto grants any subscription and
            // filters what it delivers by the ACL; retained messages would come first.
            let van1 = try MQTTClient(configuration: shipped.mqttConfiguration(as: "van-1"), logger: Logger(label: "van-1"))
            try await van1.connect()
            let wholeFleet = try await van1.subscribe(["fleet/#"])
            let aimed = try await van1.subscribe(["fleet/van-2/#", Self.checkTopic])
            let van2Topics = Self.contractTopics(Self.van2)
            // The retained fix, each contract topic live, and van-1's own check message.
            let watcher = try await shipped.subscribe(as: "watch+dispatch", "fleet/#", count: van2Topics.count + 2, timeoutSeconds: 30)

            for topic in van2Topics {
                Self.expectAccepted(try await Self.publish(shipped, as: "van-2", topic, "live"), "van-2 → \(topic)")
            }
            // The one topic a vehicle may read: where `fleetcast-agent check` reads its message back.
            try await van1.publish(topic: Self.checkTopic, payload: Array("own".utf8), qos: .atLeastOnce, retain: false)

            @Sendable func first(_ subscription: MQTTSubscription) async throws -> String? {
                try await withTimeout(.seconds(20), "van-1's first message") {
                    for try await message in subscription { return "\(message.topic) \(String(decoding: message.payload, as: UTF8.self))" }
                    return nil
                }
            }
            let own = "\(Self.checkTopic) own"
            #expect(try await first(wholeFleet) == own, "van-1 on fleet/#")
            #expect(try await first(aimed) == own, "van-1 on fleet/van-2/# and its own check topic")
            await van1.shutdown(flushTimeout: .seconds(1))
            #expect(await watcher.messages() == ["fleet/van-2/fix retained"] + van2Topics.map { "\($0) live" } + [own])
        }
    }

    @Test("passwords: anonymous clients, a wrong password, an unknown user and plain TCP are refused")
    func refusesWithoutValidCredentials() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            let v5 = ["-V", "mqttv5"]
            let notAuthorized = "Connection error: Not authorized"
            let refused = [
                RefusedLogin(what: "no user name", message: "anonymous", extra: shipped.trustOnly + v5, saying: notAuthorized),
                RefusedLogin(
                    what: "van-1 with a wrong password", message: "wrong password",
                    extra: shipped.trustOnly + ["-u", "van-1", "-P", "not-the-password"] + v5, saying: notAuthorized),
                RefusedLogin(
                    what: "an unknown user", message: "unknown", extra: shipped.trustOnly + ["-u", "van-9", "-P", "anything"] + v5,
                    saying: notAuthorized),
                RefusedLogin(
                    what: "van-1 with a wrong password, MQTT 3.1.1", message: "wrong password 3.1.1",
                    extra: shipped.trustOnly + ["-u", "van-1", "-P", "nope", "-V", "mqttv311"], saying: "not authorised"),
                // TLS only: the right password without TLS does not get in.
                RefusedLogin(
                    what: "van-1 over plain TCP", message: "plain", extra: ["-u", "van-1", "-P", shipped.passwords["van-1"]!] + v5,
                    saying: "Error"),
            ]
            try await Self.expectOnly("van-1", "with its password", on: Self.topics.fix(Self.van1), refusing: refused, shipped)
        }
    }

    @Test(
        "passwords: the real agent over TLS (CA file, user van-1, password file) publishes fixes, headings and its status; after a link cut its backlog passes the ACL too, nothing rejected"
    )
    func agentWithPassword() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            // The vehicle reaches the broker through a proxy the test cuts: a dead zone.
            let proxy = try await TCPProxy(to: shipped.broker.port)
            let port = proxy.port
            let watcher = try await shipped.subscribe(as: "watch+dispatch", "fleet/#", count: 100_000, timeoutSeconds: 120)
            let passwordFile = try shipped.files.createFile("van-1.password", shipped.passwords["van-1"]! + "\n", mode: 0o600)
            let connection = [
                "--broker", "mqtts://van-1@127.0.0.1:\(port)", "--ca-file", shipped.ca.certificateFile, "--password-file", passwordFile,
            ]
            let agent = try Self.startAgent(shipped, connection)
            defer { agent.send(SIGKILL) }

            try await Self.waitUntil("van-1 online with fixes and headings at the watcher", timeout: .seconds(30), agent: agent) {
                let received = watcher.messagesSoFar
                return Self.onlineWithFixes(received)
                    // The headings ride in their fixes (the first instant's too: nothing goes alone).
                    && Self.lines(received, on: "fleet/van-1/fix").contains { Self.json($0)?["heading"] != nil }
            }
            await proxy.kill()
            // The outage: ~30 fixes stored for later.
            try await FleetcastTestSupport.waitUntil("30 fixes stored in the outage", timeout: .seconds(30), interval: .milliseconds(200)) {
                AgentOutageTests.storedCount(shipped.files.path, vehicle: "van-1") >= 30
            }
            let restored = try await TCPProxy(port: port, to: shipped.broker.port)
            try await Self.waitUntil("van-1's backlog at the watcher", timeout: .seconds(40), agent: agent) {
                !Self.lines(watcher.messagesSoFar, on: "fleet/van-1/backlog").isEmpty
            }
            try await Self.expectCleanStop(agent)
            try await Self.waitUntil("van-1's offline status at the watcher", timeout: .seconds(10), agent: agent) {
                Self.lines(watcher.messagesSoFar, on: "fleet/van-1/status").last.flatMap { Self.json($0)?["reason"] as? String }
                    == "shutdown"
            }
            await watcher.stop()
            await restored.kill()

            let received = watcher.messagesSoFar
            #expect(received.allSatisfy { $0.hasPrefix("fleet/van-1/") }, "only van-1 published")
            let backlogLine = try #require(Self.lines(received, on: "fleet/van-1/backlog").first)
            let backlog = try #require(Self.json(backlogLine))
            #expect(backlog["vehicle"] as? String == "van-1")
            #expect((backlog["events"] as? [Any])?.isEmpty == false)
            let offlineLine = try #require(Self.lines(received, on: "fleet/van-1/status").last)
            let offline = try #require(Self.json(offlineLine))
            #expect(offline["state"] as? String == "offline")
            // The broker refused nothing the agent sent (a refused topic is counted here and logged).
            #expect(offline["rejected"] as? Int == 0, "status \(offline); agent: \(agent.standardError.suffix(3000))")
            #expect(offline["dropped"] as? Int == 0)
            #expect(!agent.standardError.contains("Not authorized"), "agent: \(agent.standardError.suffix(3000))")
        }
    }

    @Test(
        "passwords: `fleetcast-agent check` (its CA from --ca-file, as `run` takes it) passes for van-1 (MQTT 3.1.1 too: it reads its message back) and fails with ACL advice when van-1's login claims van-2"
    )
    func agentCheck() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            let passwordFile = try shipped.files.createFile("van-1.password", shipped.passwords["van-1"]!, mode: 0o600)
            func check(vehicle: String, protocolVersion: String) async throws -> (status: Int32, output: String) {
                let process = try TestProcess(
                    builtProduct("fleetcast-agent"),
                    [
                        "check", "--source", "sim:?rate=10", "--vehicle", vehicle, "--timeout", "20",
                        "--broker", "mqtts://van-1@127.0.0.1:\(shipped.broker.port)", "--password-file", passwordFile,
                        "--ca-file", shipped.ca.certificateFile,
                    ], directory: shipped.files.path, name: "check-\(vehicle)-\(protocolVersion)",
                    environment: ["FLEETCAST_BROKER_PROTOCOL": protocolVersion])
                let status = try await withTimeout(.seconds(60), "fleetcast-agent check") { await process.waitForExit() }
                return (status, process.standardOutput + process.standardError)
            }
            for protocolVersion in ["5", "3.1.1"] {
                let passed = try await check(vehicle: "van-1", protocolVersion: protocolVersion)
                #expect(passed.status == 0, "MQTT \(protocolVersion): \(passed.output)")
                #expect(
                    passed.output.contains("ok   publish  fleet/van-1/check: accepted and read back"),
                    "MQTT \(protocolVersion): \(passed.output)")
            }
            let refused = try await check(vehicle: "van-2", protocolVersion: "5")
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("FAIL publish  fleet/van-2/check:") && refused.output.contains("ACL"), "\(refused.output)")
        }
    }

    // MARK: - Client certificates (fleetcast-certs.conf)

    @Test("certificates: van-1's certificate writes van-1's topics only, whatever user name it sends; the watcher's certificate reads them")
    func certificateWritesOnlyItsOwnTopics() async throws {
        try await ShippedBroker.with(.clientCertificates) { shipped in
            let received = try await Self.van1Writes(shipped, refusing: Self.contractTopics(Self.van2)) {
                // The certificate's common name is the user name; the one the client sends is ignored.
                let claiming = try await MosquittoCLI.attemptPublish(
                    broker: shipped.broker, topic: Self.topics.fix(Self.van2), message: "van-1 claims van-2", qos: 1,
                    extra: shipped.login("van-1") + ["-u", "van-2", "-V", "mqttv5"])
                Self.expectRefused(claiming, "van-1's certificate with user name van-2 → van-2's fix")
            }
            #expect(received == Self.contractTopics(Self.van1).map { "\($0) van-1 says" } + ["fleet/van-1/status last"])
        }
    }

    @Test("certificates: no certificate (with or without a password) and a certificate from another CA are refused")
    func certificateRequired() async throws {
        try await ShippedBroker.with(.clientCertificates) { shipped in
            let v5 = ["-V", "mqttv5"]
            // Anyone can make a certificate that says CN=van-2; only the fleet CA's count.
            let rogueCA = try await TestCertificateAuthority.make(named: "rogue-ca", in: shipped.files.path)
            let forged = try await rogueCA.issue(commonName: "van-2", fileName: "forged-van-2")
            let refused = [
                RefusedLogin(what: "no certificate", message: "no certificate", extra: shipped.trustOnly + v5, saying: "Error"),
                RefusedLogin(
                    what: "a user name and password, no certificate", message: "password",
                    extra: shipped.trustOnly + ["-u", "van-2", "-P", "anything"] + v5, saying: "Error"),
                RefusedLogin(
                    what: "a certificate for van-2 from another CA", message: "forged",
                    extra: shipped.trustOnly + ["--cert", forged.certificateFile, "--key", forged.keyFile] + v5, saying: "Error"),
            ]
            try await Self.expectOnly("van-2", "with its certificate", on: Self.topics.fix(Self.van2), refusing: refused, shipped)
            // What the broker's log says about them.
            #expect(shipped.broker.log.contains("peer did not return a certificate"))
            #expect(shipped.broker.log.contains("certificate verify failed"))
        }
    }

    @Test("certificates: the real agent with certFile/keyFile (no user name, no password) publishes fixes and its status; nothing rejected")
    func agentWithClientCertificate() async throws {
        try await ShippedBroker.with(.clientCertificates) { shipped in
            let watcher = try await shipped.subscribe(as: "watch+dispatch", "fleet/#", count: 100_000, timeoutSeconds: 60)
            let certificate = try #require(shipped.certificates["van-1"])
            let agent = try Self.startAgent(
                shipped,
                [
                    "--broker", "mqtts://127.0.0.1:\(shipped.broker.port)", "--ca-file", shipped.ca.certificateFile,
                    "--cert-file", certificate.certificateFile, "--key-file", certificate.keyFile,
                ])
            defer { agent.send(SIGKILL) }

            try await Self.waitUntil("van-1 online with fixes at the watcher", timeout: .seconds(30), agent: agent) {
                Self.onlineWithFixes(watcher.messagesSoFar)
            }
            try await Self.expectCleanStop(agent)
            try await Self.waitUntil("van-1's offline status at the watcher", timeout: .seconds(10), agent: agent) {
                Self.lines(watcher.messagesSoFar, on: "fleet/van-1/status").last.flatMap { Self.json($0)?["state"] as? String } == "offline"
            }
            await watcher.stop()

            let received = watcher.messagesSoFar
            let fixLine = try #require(Self.lines(received, on: "fleet/van-1/fix").first)
            let fix = try #require(Self.json(fixLine))
            #expect(fix["lat"] is Double && fix["seq"] is Int)
            let offlineLine = try #require(Self.lines(received, on: "fleet/van-1/status").last)
            let offline = try #require(Self.json(offlineLine))
            #expect(offline["reason"] as? String == "shutdown")
            #expect(offline["rejected"] as? Int == 0, "status \(offline); agent: \(agent.standardError.suffix(3000))")
            #expect(shipped.broker.log.contains("u'van-1'"), "the broker took the certificate's common name as the user name")
        }
    }
}

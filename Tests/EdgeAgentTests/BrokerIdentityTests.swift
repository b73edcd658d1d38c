import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Who is who on the shipped broker (`deploy/mosquitto`, see ``ShippedBroker``): the client id
/// is the authenticated user (`use_username_as_clientid`, with the certificate's common name as
/// the user on the certificate listener), so nobody can close another's session by claiming its
/// client id; every user that is not a vehicle has a '+' in its name, so no pattern of the ACL
/// lets it write a vehicle's topics; the bridges run with their shipped identities and ACL.
/// Real mosquitto, the built `fleetcast-agent` and `fleet-watch`, `mosquitto_pub`/`mosquitto_sub`.
@Suite("The shipped broker configuration: client ids bound to identities, watchers and bridges", .serialized)
struct BrokerIdentityTests {
    static let van2 = VehicleID("van-2")!

    /// Starts the real agent as van-2 with its default client id, in its own state directory,
    /// and waits until the observer has its `online` status and a few fixes.
    static func startVan2(
        _ shipped: ShippedBroker, observer: MosquittoCLI.Subscriber, stateDirectory: String
    ) async throws -> TestProcess {
        var arguments = [
            "run", "--source", "sim:?rate=10", "--vehicle", "van-2", "--ca-file", shipped.ca.certificateFile,
            "--state-dir", stateDirectory,
        ]
        switch shipped.identity {
        case .passwords:
            let passwordFile = try shipped.files.createFile("van-2.password", shipped.passwords["van-2"]! + "\n", mode: 0o600)
            arguments += ["--broker", "mqtts://van-2@127.0.0.1:\(shipped.broker.port)", "--password-file", passwordFile]
        case .clientCertificates:
            let certificate = try #require(shipped.certificates["van-2"])
            arguments += [
                "--broker", "mqtts://127.0.0.1:\(shipped.broker.port)", "--cert-file", certificate.certificateFile,
                "--key-file", certificate.keyFile,
            ]
        }
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"), arguments, directory: shipped.files.path, name: "agent-van-2",
            environment: agentEveryFixEnvironment)
        try await BrokerACLTests.waitUntil("van-2 online with fixes", timeout: .seconds(30), agent: agent) {
            let received = observer.messagesSoFar
            return BrokerACLTests.lines(received, on: "fleet/van-2/status").contains {
                BrokerACLTests.json($0)?["state"] as? String == "online"
            }
                && BrokerACLTests.lines(received, on: "fleet/van-2/fix").count >= 3
        }
        return agent
    }

    /// van-2's agent runs; van-1's credentials connect three times claiming van-2's client id
    /// (MQTT 5 and 3.1.1, the agent's id and the old default `fleetcast-van-2`), a watcher once,
    /// and `fleetcast-agent check` is run for van-2 beside the agent. van-2's session is never
    /// closed: the broker never logs a takeover, the agent keeps publishing, and no `offline`
    /// reaches the fleet or stays retained.
    static func claimsNeverCloseTheVehicle(_ identity: ShippedBroker.Identity) async throws {
        try await ShippedBroker.with(identity) { shipped in
            // The observer is a reader of the fleet other than the watcher, which claims below.
            let observer = try await shipped.subscribe(as: "bridge+owntracks", "fleet/van-2/#", count: 100_000, timeoutSeconds: 120)
            let stateDirectory = shipped.files.file("van-2-state")
            let agent = try await startVan2(shipped, observer: observer, stateDirectory: stateDirectory)
            defer { agent.send(SIGKILL) }
            #expect(
                shipped.broker.log.contains(" as van-2 (") && shipped.broker.log.contains("u'van-2'"),
                "the agent is known by its vehicle id")

            let claims: [(user: String, clientID: String, version: String)] = [
                ("van-1", "van-2", "mqttv5"), ("van-1", "fleetcast-van-2", "mqttv5"), ("van-1", "van-2", "mqttv311"),
                ("watch+dispatch", "van-2", "mqttv5"),
            ]
            for claim in claims {
                let outcome = try await MosquittoCLI.attemptPublish(
                    broker: shipped.broker, topic: "fleet/van-1/fix", message: "\(claim.user) as \(claim.clientID)", qos: 1,
                    extra: shipped.login(claim.user) + ["-i", claim.clientID, "-V", claim.version])
                // Each gets in, as itself: van-1 may write its fix, the watcher may not.
                #expect(outcome.status == 0, "\(claim): \(outcome.errorOutput)")
            }
            #expect(
                shipped.broker.log.components(separatedBy: " as van-1 (").count - 1 == 3,
                "van-1's three connections are van-1's, whatever client id they sent")

            // `check` beside the running agent does not connect (it would be van-2 too); it
            // takes the agent's own --state-dir flag to find the agent's lock.
            let check = try TestProcess(
                builtProduct("fleetcast-agent"),
                [
                    "check", "--source", "sim:?rate=10", "--vehicle", "van-2", "--timeout", "20",
                    "--broker", "mqtts://van-2@127.0.0.1:\(shipped.broker.port)", "--state-dir", stateDirectory,
                ], directory: shipped.files.path, name: "check-beside-agent",
                environment: ["FLEETCAST_BROKER_CA_FILE": shipped.ca.certificateFile])
            let checkStatus = try await withTimeout(.seconds(60), "fleetcast-agent check") { await check.waitForExit() }
            let checkOutput = check.standardOutput + check.standardError
            #expect(checkStatus == 1, "\(checkOutput)")
            #expect(
                checkOutput.contains("FAIL broker") && checkOutput.contains("not tried: an agent runs for van-2")
                    && checkOutput.contains("systemctl stop fleetcast-agent"), "\(checkOutput)")

            // The agent goes on publishing on its one connection.
            let fixesBefore = BrokerACLTests.lines(observer.messagesSoFar, on: "fleet/van-2/fix").count
            try await BrokerACLTests.waitUntil("van-2's fixes after the claims", timeout: .seconds(20), agent: agent) {
                BrokerACLTests.lines(observer.messagesSoFar, on: "fleet/van-2/fix").count >= fixesBefore + 10
            }
            #expect(agent.isRunning)
            #expect(
                !shipped.broker.log.contains("already connected, closing old connection"), "broker log:\n\(shipped.broker.log.suffix(4000))"
            )
            #expect(
                shipped.broker.log.components(separatedBy: " as van-2 (").count - 1 == 1, "van-2 connected once, and stayed")
            let statuses = BrokerACLTests.lines(observer.messagesSoFar, on: "fleet/van-2/status")
            #expect(statuses.allSatisfy { BrokerACLTests.json($0)?["state"] as? String == "online" }, "\(statuses)")
            await observer.stop()
            let retained = try await MosquittoCLI.retained(
                broker: shipped.broker, topic: "fleet/van-2/status", extra: shipped.login("watch+dispatch"))
            #expect(retained.flatMap(BrokerACLTests.json)?["state"] as? String == "online", "\(retained ?? "nothing retained")")
        }
    }

    @Test(
        "passwords: van-1's credentials claiming van-2's client id (three connections) and a watcher claiming it never close van-2's session; its status stays online; check beside the agent does not connect"
    )
    func passwordClaimsNeverCloseTheVehicle() async throws {
        try await Self.claimsNeverCloseTheVehicle(.passwords)
    }

    @Test("certificates: van-1's certificate claiming van-2's client id never closes van-2's session; its status stays online")
    func certificateClaimsNeverCloseTheVehicle() async throws {
        try await Self.claimsNeverCloseTheVehicle(.clientCertificates)
    }

    @Test("watchers, bridges and applications write no vehicle's topics: the pattern lines grant a user name with '+' nothing")
    func nonVehiclesWriteNoVehicleTopics() async throws {
        try await ShippedBroker.with(.passwords) { shipped in
            let observer = try await shipped.subscribe(as: "bridge+owntracks", "fleet/#", count: 1)
            let users = [
                "watch+dispatch", "bridge+homeassistant", "bridge+homeassistant-pub", "bridge+owntracks-pub", "app+homeassistant",
                "app+owntracks",
            ]
            for user in users {
                for topic in ["fleet/van-1/fix", "fleet/van-1/status", "fleet/van-1/check"] {
                    BrokerACLTests.expectRefused(
                        try await BrokerACLTests.publish(shipped, as: user, topic, "\(user) poses"), "\(user) → \(topic)")
                }
            }
            // Under a user name of its own that is no vehicle id, through the patterns: mosquitto
            // refuses a pattern to a user name with '+' (a topic with '+' cannot be published).
            #expect(shipped.broker.log.contains("ACL denying access to client with dangerous username \"watch+dispatch\""))
            BrokerACLTests.expectAccepted(
                try await BrokerACLTests.publish(shipped, as: "van-1", "fleet/van-1/fix", "van-1 says"), "van-1 → its fix")
            #expect(await observer.messages() == ["fleet/van-1/fix van-1 says"])
        }
    }

    /// The Home Assistant and OwnTracks bridges (`fleet-watch bridge`, built) logged in as the
    /// shipped ACL's bridge users, each with its two connections, and Home Assistant's and
    /// OwnTracks Recorder's logins reading what they publish.
    static func bridgesWork(_ identity: ShippedBroker.Identity) async throws {
        try await ShippedBroker.with(identity) { shipped in
            let homeAssistant = try await shipped.subscribe(
                as: "app+homeassistant", "homeassistant/#", count: 100, timeoutSeconds: 60,
                extra: ["-t", "fleetcast/homeassistant/#", "-t", "fleet/+/status"])
            let recorder = try await shipped.subscribe(as: "app+owntracks", "owntracks/#", count: 100, timeoutSeconds: 60)

            func bridge(_ application: String) throws -> TestProcess {
                let user = "bridge+\(application)"
                var arguments = ["bridge", "--to", application, "--ca-file", shipped.ca.certificateFile]
                var environment: [String: String] = [:]
                switch identity {
                case .passwords:
                    arguments += ["--broker", "mqtts://\(user)@127.0.0.1:\(shipped.broker.port)"]
                    environment["FLEETCAST_PASSWORD"] = shipped.passwords[user]
                case .clientCertificates:
                    let reading = shipped.certificates[user]!, publishing = shipped.certificates[user + "-pub"]!
                    arguments += [
                        "--broker", "mqtts://127.0.0.1:\(shipped.broker.port)", "--cert-file", reading.certificateFile,
                        "--key-file", reading.keyFile, "--publish-cert-file", publishing.certificateFile,
                        "--publish-key-file", publishing.keyFile,
                    ]
                }
                return try TestProcess(
                    builtProduct("fleet-watch"), arguments, directory: shipped.files.path, name: user, environment: environment)
            }
            let bridges = [try bridge("homeassistant"), try bridge("owntracks")]
            defer { for bridge in bridges { bridge.send(SIGKILL) } }
            for process in bridges {
                try await waitUntil("\(process.commandLine) subscribed", timeout: .seconds(30)) {
                    if !process.isRunning {
                        throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
                    }
                    return process.standardError.contains("Subscribed to the fleet")
                }
            }

            // van-1, as its agent would: online, then a fix.
            let status = String(
                decoding: FleetPayload.encode(VehicleStatus(vehicle: VehicleID("van-1")!, state: .online, agentVersion: "0.3.0")),
                as: UTF8.self)
            BrokerACLTests.expectAccepted(
                try await BrokerACLTests.publish(shipped, as: "van-1", "fleet/van-1/status", status, retain: true), "van-1 online")
            let fix = Fix(
                time: UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!, latitude: 48.5, longitude: -3.25,
                speed: 10, mode: .threeD, satellitesUsed: 7, eph: 3.2)
            let fixJSON = String(decoding: FleetPayload.encode(fix, vehicle: "van-1", seq: 1), as: UTF8.self)
            BrokerACLTests.expectAccepted(
                try await BrokerACLTests.publish(shipped, as: "van-1", "fleet/van-1/fix", fixJSON, retain: true), "van-1's fix")

            func topics(_ subscriber: MosquittoCLI.Subscriber) -> Set<String> {
                Set(subscriber.messagesSoFar.compactMap { $0.split(separator: " ", maxSplits: 1).first.map(String.init) })
            }
            let expected: Set = [
                "homeassistant/device_tracker/van-1/config", "homeassistant/sensor/van-1/speed/config",
                "homeassistant/sensor/van-1/course/config", "fleetcast/homeassistant/van-1/attributes", "fleet/van-1/status",
            ]
            try await waitUntil("Home Assistant's discovery config and attributes", timeout: .seconds(20)) {
                expected.isSubset(of: topics(homeAssistant))
            }
            try await waitUntil("OwnTracks Recorder's location", timeout: .seconds(20)) {
                topics(recorder).contains("owntracks/fleet/van-1")
            }
            await homeAssistant.stop()
            await recorder.stop()
            let attributes = try #require(
                homeAssistant.messagesSoFar.first { $0.hasPrefix("fleetcast/homeassistant/van-1/attributes ") })
            #expect(attributes.contains("\"latitude\":48.5"), "\(attributes)")
            let location = try #require(recorder.messagesSoFar.first { $0.hasPrefix("owntracks/fleet/van-1 ") })
            #expect(location.contains("\"lat\":48.5"), "\(location)")

            // Both connections of each bridge stayed, under their own names, and nothing was refused.
            let log = shipped.broker.log
            #expect(!log.contains("already connected, closing old connection"), "broker log:\n\(log.suffix(4000))")
            #expect(!log.contains("Denied PUBLISH"), "broker log:\n\(log.suffix(4000))")
            for user in ["bridge+homeassistant", "bridge+homeassistant-pub", "bridge+owntracks", "bridge+owntracks-pub"] {
                #expect(log.contains(" as \(user) ("), "\(user) connected")
            }
            for process in bridges {
                #expect(process.isRunning && !process.standardError.contains("refused"), "\(process.standardError.suffix(3000))")
            }
        }
    }

    @Test(
        "passwords: both bridges run as their shipped users (bridge+…, bridge+…-pub), Home Assistant's and OwnTracks' logins read what they publish, nothing refused",
        .enabled(
            if: isBuilt("fleet-watch"), "no fleet-watch: the ThreadSanitizer build leaves it out (FLEETCAST_PRODUCT_PATH names another)")
    )
    func bridgesWithPasswords() async throws {
        try await Self.bridgesWork(.passwords)
    }

    @Test(
        "certificates: both bridges run with a certificate per connection (--publish-cert-file), nothing refused",
        .enabled(
            if: isBuilt("fleet-watch"), "no fleet-watch: the ThreadSanitizer build leaves it out (FLEETCAST_PRODUCT_PATH names another)")
    )
    func bridgesWithCertificates() async throws {
        try await Self.bridgesWork(.clientCertificates)
    }
}

import FleetcastTestSupport
import InMemoryLogging
import Logging
import MQTT
import Testing

@Suite struct MQTTClientConnectTests {
    @Test func connectionRefusedWhenNothingListens() async throws {
        let port = try FreePort.next()
        let client = try MQTTClient(
            configuration: MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("refused")),
            logger: quietLogger)
        await #expect(throws: MQTTError.connectionRefused(host: "127.0.0.1", port: port)) { try await client.connect() }
        #expect("\(MQTTError.connectionRefused(host: "127.0.0.1", port: port))".contains("connection refused"))
        #expect(client.connectionState == .closed)
    }

    @Test func dnsFailureSaysTheHostWasNotFound() async throws {
        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                broker: try BrokerURL(parsing: "mqtt://no-such-host.invalid"), clientID: uniqueClientID("dns")),
            logger: quietLogger)
        await #expect(throws: MQTTError.hostNotFound(host: "no-such-host.invalid")) { try await client.connect() }
    }

    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func passwordFileGoodAndBadCredentials(version: MQTTProtocolVersion) async throws {
        try await withBroker(.init(users: ["alice": "s3cret-pw", "bob": "other"])) { broker in
            let memory = InMemoryLogHandler()
            var logger = Logger(label: "password-test", factory: { _ in memory })
            logger.logLevel = .trace

            let good = try makeClient(
                broker,
                configure: {
                    $0.protocolVersion = version
                    $0.username = "alice"
                    $0.password = "s3cret-pw"
                }, logger: logger)
            try await good.connect()
            try await good.publish(topic: "auth/ok", string: "hello", qos: .atLeastOnce)
            await good.shutdown()

            let bad = try makeClient(
                broker, url: "mqtt://alice@127.0.0.1:\(broker.port)",
                configure: {
                    $0.protocolVersion = version
                    $0.password = "wrong-pw"
                }, logger: logger)
            await #expect {
                try await bad.connect()
            } throws: { error in
                guard (error as? MQTTError)?.code == .badUserNameOrPassword else { return false }
                return "\(error)".contains("bad user name or password")
            }

            let anonymous = try makeClient(broker, configure: { $0.protocolVersion = version })
            await #expect {
                try await anonymous.connect()
            } throws: { error in
                guard (error as? MQTTError)?.code == .notAuthorized else { return false }
                return "\(error)".contains("not authorized")
            }

            let everything = memory.entries.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n")
            #expect(!everything.isEmpty)
            #expect(!everything.contains("s3cret-pw") && !everything.contains("wrong-pw"), "passwords must never be logged")
        }
    }

    @Test func tlsWithTheRightCAConnectsAndPublishes() async throws {
        try await withBroker(.init(tls: true)) { broker in
            let client = try makeClient(broker)
            try await client.connect()
            #expect(client.connectionState == .connected)
            let subscription = try await client.subscribe(["tls/#"])
            try await client.publish(topic: "tls/hello", string: "over TLS", qos: .exactlyOnce)
            let received = try await collect(1, from: subscription)
            #expect(received.map(\.text) == ["over TLS"])
            await client.shutdown()
        }
    }

    @Test func tlsWithAnotherCAIsNotTrusted() async throws {
        try await withBroker(.init(tls: true)) { broker in
            let other = try #require(broker.certificates?.otherCAFile)
            let client = try makeClient(broker, configure: { $0.tls = MQTTTLSConfiguration(caFile: other) })
            await #expect {
                try await client.connect()
            } throws: { error in
                guard let error = error as? MQTTError, error.code == .tlsCertificateNotTrusted else { return false }
                return error.host == "localhost" && "\(error)".contains("not trusted")
            }
        }
    }

    @Test func tlsHostnameMismatchIsReported() async throws {
        try await withBroker(.init(tls: true)) { broker in
            // The certificate names only "localhost"; connect by IP address.
            let client = try makeClient(broker, url: "mqtts://127.0.0.1:\(broker.port)")
            await #expect(throws: MQTTError.tlsHostnameMismatch(host: "127.0.0.1")) { try await client.connect() }
        }
    }

    @Test func clientCertificateIsPresentedWhenTheBrokerRequiresOne() async throws {
        try await withBroker(.init(tls: true, requireClientCertificate: true)) { broker in
            let certificates = try #require(broker.certificates)
            let withCertificate = try makeClient(
                broker,
                configure: {
                    $0.tls = MQTTTLSConfiguration(
                        caFile: certificates.caFile, certificateFile: certificates.clientCertificateFile,
                        keyFile: certificates.clientKeyFile)
                })
            try await withCertificate.connect()
            try await withCertificate.publish(topic: "mtls/ok", string: "yes", qos: .atLeastOnce)
            await withCertificate.shutdown()

            let without = try makeClient(broker)
            // TLS 1.3: the broker's "certificate required" alert arrives after the handshake, so
            // libmosquitto reports it either with OpenSSL's text or as a protocol error.
            await #expect {
                try await without.connect()
            } throws: { error in
                guard let error = error as? MQTTError, error.code == .tls else { return false }
                return error.host == "localhost"
            }
            #expect(without.connectionState == .closed)
        }
    }

    @Test func unreadableCAFileIsAConfigurationError() throws {
        #expect {
            _ = try MQTTClient(
                configuration: MQTTConfiguration(
                    broker: try BrokerURL(parsing: "mqtts://localhost"), clientID: "x",
                    tls: MQTTTLSConfiguration(caFile: "/nonexistent/ca.crt")),
                logger: quietLogger)
        } throws: { error in
            guard let error = error as? MQTTError, error.code == .invalidConfiguration else { return false }
            return error.detail.contains("/nonexistent/ca.crt")
        }
    }

    @Test func connectTwiceIsRefusedAndShutdownClosesStreams() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            let states = client.connectionStates()
            try await client.connect()
            await #expect(throws: MQTTError.self) { try await client.connect() }
            let subscription = try await client.subscribe(["closing/#"])
            await client.shutdown()
            var seen: [MQTTConnectionState] = []
            for await state in states { seen.append(state) }
            #expect(seen == [.idle, .connecting, .connected, .closed])
            let leftover = try await collect(1, from: subscription)
            #expect(leftover.isEmpty, "a subscription ends when the client shuts down")
            await #expect(throws: MQTTError.shutdown) { try await client.publish(topic: "closing/x", string: "late") }
        }
    }
}

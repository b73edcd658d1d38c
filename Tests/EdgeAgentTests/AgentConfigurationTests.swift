import EdgeConfiguration
import EdgeCore
import EdgeOutbox
import EdgePublisher
import FleetProtocol
import FleetcastTestSupport
import MQTT
import Testing

@Suite("Agent configuration")
struct AgentConfigurationTests {
    private func load(
        yaml: String? = nil, environment: [String: String] = [:], flags: [String: String] = [:],
        in dir: TemporaryDirectory
    ) async throws -> AgentConfiguration {
        let path = try yaml.map { try dir.createFile("agent.yaml", $0) }
        return try await AgentConfiguration.load(filePath: path, environment: environment, flags: flags)
    }

    /// The problems' messages of a refused configuration (empty if it loaded).
    private func problems(
        yaml: String? = nil, environment: [String: String] = [:], flags: [String: String] = [:],
        in dir: TemporaryDirectory
    ) async -> [String] {
        do {
            _ = try await load(yaml: yaml, environment: environment, flags: flags, in: dir)
            return []
        } catch let error as ConfigurationError {
            return error.problems.map(\.message)
        } catch {
            return ["unexpected error type: \(error)"]
        }
    }

    @Test("several brokers: a YAML list, commas in the environment, repeated flags; one scheme")
    func brokerLists() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let nodes = [BrokerURL(host: "n1"), BrokerURL(host: "n2", port: 1884), BrokerURL(host: "n3")]
        let fromYAML = try await load(yaml: "vehicle: van-7\nbroker:\n  url: [mqtt://n1, \"mqtt://n2:1884\", mqtt://n3]\n", in: dir)
        #expect(fromYAML.broker.urls == nodes)
        #expect(fromYAML.mqttConfiguration.brokers == nodes)
        let fromEnvironment = try await load(
            environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_URL": "mqtt://n1, mqtt://n2:1884,mqtt://n3"], in: dir)
        #expect(fromEnvironment.broker.urls == nodes)
        let fromFlags = try await load(
            environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_URL": "mqtt://elsewhere"],
            flags: ["broker.url": "mqtt://n1,mqtt://n2:1884,mqtt://n3", "broker.protocol": "3.1.1"], in: dir)
        #expect(fromFlags.broker.urls == nodes, "flags win over the environment")
        #expect(fromFlags.mqttConfiguration.protocolVersion == .v311)
        let mixed = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_URL": "mqtt://n1,mqtts://n2"], in: dir)
        #expect(mixed.count == 1 && mixed[0].contains("mix mqtt:// and mqtts://"), "\(mixed)")
        let bad = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_URL": "mqtt://n1,http://n2"], in: dir)
        #expect(bad.count == 1 && bad[0].contains("http://n2"), "\(bad)")
    }

    @Test("a vehicle id or prefix that some broker cannot carry is refused with the reason")
    func unportableNames() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let dotted = await problems(environment: ["FLEETCAST_VEHICLE": "van.7"], in: dir)
        #expect(dotted.count == 1 && dotted[0].contains("NATS") && dotted[0].contains("van.7"), "\(dotted)")
        for prefix in ["acme.fleet", "acme fleet", "fleet/*", "fleet/>"] {
            let refused = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_TOPICS_PREFIX": prefix], in: dir)
            #expect(refused.count == 1 && refused[0].contains("topics.prefix"), "\(prefix): \(refused)")
        }
        let protocolProblem = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_PROTOCOL": "4"], in: dir)
        #expect(protocolProblem.count == 1 && protocolProblem[0].contains("auto, 5 or 3.1.1"), "\(protocolProblem)")
    }

    @Test("defaults: only the vehicle is required")
    func defaults() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let config = try await load(environment: ["FLEETCAST_VEHICLE": "van-7"], in: dir)
        #expect(config.vehicle.rawValue == "van-7")
        #expect(config.source == "sim:")
        #expect(config.broker.url == BrokerURL(host: "localhost", port: 1883))
        #expect(config.broker.protocolVersion == .auto, "MQTT 5, and 3.1.1 with a broker that refuses it")
        #expect(config.mqttConfiguration.protocolVersion == .auto)
        #expect(config.broker.otherURLs.isEmpty)
        #expect(config.broker.keepAliveSeconds == 240, "a keep-alive under cellular NAT timeouts")
        #expect(config.broker.maxInflight == 20)
        #expect(config.topics.prefix == "fleet")
        #expect(config.fixQoS == .atLeastOnce)
        #expect(config.headingQoS == .atLeastOnce, "every numbered message is one gaps can count on")
        #expect(config.payloadFields == .standard, "a metered link's field set by default")
        #expect(config.messageExpirySeconds == nil)
        #expect(config.policy == .trackerDefaults, "a tracker's policy for a metered link by default")
        #expect(config.policy.stoppedInterval == 3600 && config.policy.minDistance == 100)
        #expect(config.outbox == AgentConfiguration.OutboxSettings())
        #expect(config.stateDirectory == "/var/lib/fleetcast")
        #expect(config.logLevel == .info)
        // The vehicle id, as a broker that binds the client id to the user name makes it.
        #expect(config.mqttConfiguration.clientID == "van-7")
        #expect(config.fixTime == AgentConfiguration.FixTimeSettings())
    }

    @Test("payload.fields: standard or full, from the file or the environment; anything else named")
    func payloadFields() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let full = try await load(yaml: "vehicle: van-7\npayload:\n  fields: full\n", in: dir)
        #expect(full.payloadFields == .full)
        #expect(full.publisherSettings(agentVersion: nil).fields == .full)
        let bad = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_PAYLOAD_FIELDS": "all"], in: dir)
        #expect(bad == ["payload.fields in environment variable FLEETCAST_PAYLOAD_FIELDS: expected standard or full, got \"all\""])
    }

    @Test("file < environment < flags")
    func precedence() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let yaml = """
            vehicle: from-file
            broker:
              url: mqtt://file-broker:1884
              keepAlive: 40
            qos:
              fix: 0
              heading: 1
            report:
              minDistance: 25
            """
        let config = try await load(
            yaml: yaml,
            environment: ["FLEETCAST_VEHICLE": "from-env", "FLEETCAST_QOS_FIX": "2", "FLEETCAST_BROKER_KEEP_ALIVE": "45", "HOME": "/root"],
            flags: ["vehicle": "from-flag"],
            in: dir
        )
        #expect(config.vehicle.rawValue == "from-flag")
        #expect(config.fixQoS == .exactlyOnce)
        #expect(config.broker.keepAliveSeconds == 45)
        #expect(config.headingQoS == .atLeastOnce)
        #expect(config.broker.url.host == "file-broker")
        #expect(config.broker.url.port == 1884)
        #expect(config.policy.minDistance == 25)
        #expect(config.origins["vehicle"] == .flag("--vehicle"))
        #expect(config.origins["qos.fix"] == .environment("FLEETCAST_QOS_FIX"))
        #expect(config.origins["broker.keepAlive"] == .environment("FLEETCAST_BROKER_KEEP_ALIVE"))
        #expect(config.origins["qos.heading"] == .file(dir.file("agent.yaml")))
    }

    @Test("a bad value in the file names key, file and expected form")
    func fileError() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let messages = await problems(yaml: "vehicle: van-7\nqos:\n  fix: 3\n", in: dir)
        #expect(messages == ["qos.fix in \(dir.file("agent.yaml")): expected 0, 1 or 2, got \"3\""])
    }

    @Test("a bad value in the environment names the variable")
    func environmentError() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let messages = await problems(environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_QOS_HEADING": "high"], in: dir)
        #expect(messages == ["qos.heading in environment variable FLEETCAST_QOS_HEADING: expected 0, 1 or 2, got \"high\""])
    }

    @Test("a bad value in a flag names the flag")
    func flagError() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let messages = await problems(flags: ["vehicle": "van-7", "broker.keepAlive": "2"], in: dir)
        #expect(messages == ["broker.keepAlive in flag --broker-keep-alive: expected a whole number of seconds from 5 to 65535, got \"2\""])
    }

    @Test("every bad value is reported at once, each with its expected form")
    func manyErrors() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let yaml = """
            vehicle: "van/7"
            source: "not a uri"
            broker:
              url: http://broker:1883
              protocol: 4
              maxInflight: 0
            topics:
              prefix: "fleet/#"
            messageExpiry: -5
            report:
              minInterval: 30
              maxInterval: 10
              minDistance: abc
              minHeadingChange: 270
              stationarySpeed: -1
            outbox:
              maxBytes: 10GB-ish
              drainRate: 0
            log:
              level: verbose
            """
        let messages = await problems(yaml: yaml, in: dir)
        let path = dir.file("agent.yaml")
        #expect(
            messages == [
                "vehicle in \(path): expected 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-', got \"van/7\"",
                "source in \(path): expected a source URI such as gpsd://localhost:2947, serial:///dev/ttyUSB0, replay:/path/to/file.nmea or sim: (no password), got \"not a uri\"",
                "broker.url in \(path): expected mqtt://[user@]host[:port] or mqtts://[user@]host[:port] (no password, no path); several nodes of one broker as a list or separated by commas, got \"http://broker:1883\"",
                "broker.protocol in \(path): expected auto, 5 or 3.1.1, got \"4\"",
                "broker.maxInflight in \(path): expected a whole number from 1 to 65535, got \"0\"",
                "topics.prefix in \(path): expected one or more non-empty topic levels separated by '/', without '+', '#', a leading '$', or the '.', ' ', '*' and '>' some brokers (NATS) treat specially (e.g. fleet or acme/fleet), got \"fleet/#\"",
                "messageExpiry in \(path): expected a whole number of seconds from 1 to 4294967295, got \"-5\"",
                "report.maxInterval in \(path): expected at least report.minInterval (30 s), got \"10\"",
                "report.minDistance in \(path): expected a number of metres, more than 0, or off, got \"abc\"",
                "report.minHeadingChange in \(path): expected a number of degrees, more than 0 and at most 180, or off, got \"270\"",
                "report.stationarySpeed in \(path): expected a speed in m/s, 0 or more (0 turns the track hold off), got \"-1\"",
                "outbox.maxBytes in \(path): expected a size from 1MiB to 1TiB, in bytes or with KiB, MiB, GiB (e.g. 64MiB), got \"10GB-ish\"",
                "outbox.drainRate in \(path): expected a whole number of events per second from 1 to 100000, got \"0\"",
                "log.level in \(path): expected trace, debug, info, notice, warning, error or critical, got \"verbose\"",
            ])
    }

    @Test("unknown keys in the file are reported, with a suggestion for typos")
    func unknownKeys() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let yaml = """
            vehicle: van-7
            qos:
              fixx: 2
            brokr:
              url: mqtt://x
            colour: red
            """
        let path = dir.file("agent.yaml")
        let messages = await problems(yaml: yaml, in: dir)
        #expect(
            messages == [
                "unknown key brokr.url in \(path) (did you mean broker.url?)",
                "unknown key colour in \(path)",
                "unknown key qos.fixx in \(path) (did you mean qos.fix?)",
            ])
    }

    @Test("a missing vehicle, an invalid vehicle, a missing file are refused clearly")
    func vehicleAndFile() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        #expect(
            await problems(in: dir) == [
                "vehicle is required: set it in the configuration file, the environment variable FLEETCAST_VEHICLE or the flag --vehicle"
            ])
        #expect(
            await problems(flags: ["vehicle": "van 7"], in: dir) == [
                "vehicle in flag --vehicle: expected 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-', got \"van 7\""
            ])
        #expect(await problems(flags: ["vehicle": String(repeating: "v", count: 65)], in: dir).count == 1)
        let missing = dir.file("nope.yaml")
        do {
            _ = try await AgentConfiguration.load(filePath: missing, environment: [:], flags: [:])
            Issue.record("a missing file must be refused")
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.description.hasPrefix("cannot read configuration file \(missing)"))
        }
        #expect(await problems(yaml: "- just\n- a list\n", in: dir).first?.hasPrefix("cannot read configuration file") == true)
    }

    @Test("passwords come from a file or the environment, never flags or the config file, and are never shown")
    func passwords() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let passwordFile = try dir.createFile("password", "s3cr3t-Pa55\n", mode: 0o600)
        let fromFile = try await load(
            yaml: "vehicle: van-7\nbroker:\n  url: mqtts://alice@broker.example:8883\n  passwordFile: \(passwordFile)\n", in: dir
        )
        #expect(fromFile.broker.password?.value == "s3cr3t-Pa55")
        #expect(fromFile.broker.username == "alice")
        #expect(fromFile.broker.url.usesTLS)
        #expect(!fromFile.description.contains("s3cr3t"))
        #expect(fromFile.description.contains("<redacted>"))

        let fromEnvironment = try await load(
            environment: ["FLEETCAST_VEHICLE": "van-7", "FLEETCAST_BROKER_PASSWORD": "env-Secret-9"], in: dir
        )
        #expect(fromEnvironment.broker.password?.value == "env-Secret-9")
        #expect(!fromEnvironment.description.contains("env-Secret-9"))
        #expect(!"\(fromEnvironment)".contains("env-Secret-9"))

        let flagMessages = await problems(flags: ["vehicle": "van-7", "broker.password": "hunter2"], in: dir)
        #expect(
            flagMessages == [
                "broker.password in flag --broker-password: a password is never accepted on the command line; use broker.passwordFile or the environment variable FLEETCAST_BROKER_PASSWORD"
            ])
        #expect(!flagMessages.joined().contains("hunter2"))

        let fileMessages = await problems(yaml: "vehicle: van-7\nbroker:\n  password: hunter2\n", in: dir)
        #expect(fileMessages.count == 1)
        #expect(fileMessages.first?.hasPrefix("broker.password in \(dir.file("agent.yaml")): a password is not accepted") == true)
        #expect(!fileMessages.joined().contains("hunter2"))

        let urlPassword = await problems(flags: ["vehicle": "van-7", "broker.url": "mqtt://bob:hunter2@broker"], in: dir)
        #expect(urlPassword.count == 1)
        #expect(urlPassword.first?.hasPrefix("broker.url in flag --broker-url: expected mqtt://[user@]host[:port]") == true)

        let unreadable = dir.file("no-such-password")
        let missingFile = await problems(flags: ["vehicle": "van-7", "broker.passwordFile": unreadable], in: dir)
        #expect(missingFile.count == 1)
        #expect(missingFile.first?.contains(unreadable) == true)
    }

    @Test("TLS files need mqtts, and a client certificate needs its key")
    func tlsFiles() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let ca = try dir.createFile("ca.pem", "-----BEGIN CERTIFICATE-----\n")
        let cert = try dir.createFile("client.crt", "-----BEGIN CERTIFICATE-----\n")
        let plain = await problems(flags: ["vehicle": "van-7", "broker.caFile": ca], in: dir)
        #expect(
            plain == [
                "broker.caFile in flag --broker-ca-file: TLS files need a broker.url starting with mqtts://, got \"mqtt://localhost:1883\""
            ])
        let lonely = await problems(flags: ["vehicle": "van-7", "broker.url": "mqtts://broker", "broker.certFile": cert], in: dir)
        #expect(
            lonely == ["broker.certFile in flag --broker-cert-file: broker.certFile and broker.keyFile go together; give both or neither"])
        let missing = dir.file("missing-ca.pem")
        let unreadable = await problems(flags: ["vehicle": "van-7", "broker.url": "mqtts://broker", "broker.caFile": missing], in: dir)
        #expect(
            unreadable == [
                "broker.caFile in flag --broker-ca-file: expected a readable file (No such file or directory), got \"\(missing)\""
            ])
    }

    @Test("environment variable and flag names follow the keys")
    func names() {
        #expect(AgentConfiguration.environmentName("broker.keepAlive") == "FLEETCAST_BROKER_KEEP_ALIVE")
        #expect(AgentConfiguration.environmentName("stateDir") == "FLEETCAST_STATE_DIR")
        #expect(AgentConfiguration.flagName("report.minHeadingChange") == "--report-min-heading-change")
        #expect(AgentConfiguration.flagName("vehicle") == "--vehicle")
    }

    @Test("every key can be set through its environment variable")
    func everyKeyFromEnvironment() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let ca = try dir.createFile("ca.pem", "x")
        let values: [String: String] = [
            "vehicle": "van-7", "source": "gpsd://localhost:2947", "broker.url": "mqtts://broker.example",
            "broker.username": "u", "broker.caFile": ca, "broker.protocol": "3.1.1", "broker.keepAlive": "60",
            "broker.maxInflight": "5", "topics.prefix": "acme/fleet", "qos.fix": "2", "qos.heading": "1",
            "messageExpiry": "600", "report.minInterval": "2", "report.maxInterval": "120",
            "report.minDistance": "30", "report.minHeadingChange": "15", "report.stationarySpeed": "0.8",
            "outbox.maxBytes": "16MiB", "outbox.maxAge": "2d", "outbox.drainRate": "50", "outbox.syncInterval": "0.5", "stateDir": dir.path,
            "log.level": "debug",
        ]
        let environment = Dictionary(uniqueKeysWithValues: values.map { (AgentConfiguration.environmentName($0.key), $0.value) })
        let config = try await load(environment: environment, in: dir)
        #expect(config.source == "gpsd://localhost:2947")
        #expect(config.broker.protocolVersion == .v311)
        #expect(config.broker.username == "u")
        #expect(config.broker.caFile == ca)
        #expect(config.broker.maxInflight == 5)
        #expect(config.topics.prefix == "acme/fleet")
        #expect(config.messageExpirySeconds == 600)
        #expect(
            config.policy
                == ReportingPolicy(
                    minInterval: 2, maxInterval: 120, minDistance: 30, minHeadingChange: 15, stationarySpeed: 0.8,
                    stoppedInterval: 3600))
        #expect(
            config.outbox
                == AgentConfiguration.OutboxSettings(syncIntervalSeconds: 0.5, maxBytes: 16 << 20, maxAgeSeconds: 2 * 86_400, drainRate: 50)
        )
        #expect(config.logLevel == .debug)
        #expect(Set(config.origins.keys) == Set(values.keys))
    }

    @Test("the documented sample file uses only known keys and valid values")
    func sampleFile() async throws {
        let path = RepositoryPath.of("config/agent.yaml")
        do {
            _ = try await AgentConfiguration.load(filePath: path, environment: [:], flags: [:])
        } catch {
            // Only the files it points to (which exist on a vehicle, not here) may be missing.
            #expect(Set(error.problems.map(\.key)) == ["broker.passwordFile", "broker.caFile"], "\(error)")
        }
    }

    @Test(
        "report.everyFix publishes every fix; 'off' turns one rule off; a heartbeat below the default floor lowers it; a replay uploads every fix unless a rule is set"
    )
    func reportingPolicyChoices() async throws {
        let dir = try TemporaryDirectory()
        let everyFix = try await load(environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_REPORT_EVERY_FIX": "1"], in: dir)
        #expect(everyFix.policy == ReportingPolicy(stationarySpeed: 0.5) && !everyFix.policy.limitsRate)
        let off = try await load(
            environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_REPORT_MIN_DISTANCE": "off", "FLEETCAST_REPORT_MAX_INTERVAL": "5"], in: dir)
        #expect(off.policy.minDistance == nil && off.policy.maxInterval == 5 && off.policy.minInterval == 5)
        #expect(off.policy.minHeadingChange == 15 && off.policy.stoppedInterval == 3600)
        await #expect(throws: ConfigurationError.self) {
            try await load(environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_REPORT_EVERY_FIX": "sometimes"], in: dir)
        }
        let replay = try await load(environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_SOURCE": "replay:/tmp/x.nmea"], in: dir)
        #expect(!replay.publisherSettings(agentVersion: nil, lossless: true).policy.limitsRate, "a replay uploads every fix")
        #expect(replay.publisherSettings(agentVersion: nil, lossless: false).policy == .trackerDefaults)
        let thinned = try await load(
            environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_SOURCE": "replay:/tmp/x.nmea", "FLEETCAST_REPORT_MIN_INTERVAL": "30"],
            in: dir)
        #expect(thinned.publisherSettings(agentVersion: nil, lossless: true).policy.minInterval == 30, "unless a rule is set")
    }

    @Test(
        "uplink.batch: off by default; seconds or with a unit from the file, the environment or the flag; out of range or not a duration is refused"
    )
    func uplinkBatch() async throws {
        let dir = try TemporaryDirectory()
        let plain = try await load(environment: ["FLEETCAST_VEHICLE": "v"], in: dir)
        #expect(plain.uplinkBatchSeconds == nil && plain.publisherSettings(agentVersion: nil).uplinkBatch == nil)
        let file = try await load(yaml: "vehicle: v\nuplink:\n  batch: 2m\n", in: dir)
        #expect(file.uplinkBatchSeconds == 120 && file.publisherSettings(agentVersion: nil).uplinkBatch == .seconds(120))
        #expect(file.publisherSettings(agentVersion: nil, lossless: true).uplinkBatch == nil, "a replay uploads as it does anyway")
        let environment = try await load(yaml: "vehicle: v\nuplink:\n  batch: 2m\n", environment: ["FLEETCAST_UPLINK_BATCH": "60"], in: dir)
        #expect(environment.uplinkBatchSeconds == 60)
        let flag = try await load(
            environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_UPLINK_BATCH": "60"], flags: ["uplink.batch": "off"], in: dir)
        #expect(flag.uplinkBatchSeconds == nil)
        #expect(flag.description.contains("uplink.batch = off  (flag --uplink-batch)"), "\(flag.description)")
        for bad in ["0.5", "2h", "soon", "-1"] {
            let messages = await problems(environment: ["FLEETCAST_VEHICLE": "v", "FLEETCAST_UPLINK_BATCH": bad], in: dir)
            #expect(
                messages == [
                    "uplink.batch in environment variable FLEETCAST_UPLINK_BATCH: expected a duration from 1s to 1h, in seconds or with s, m, h (e.g. 60), or off, got \"\(bad)\""
                ], "\(messages)")
        }
    }
}

import FleetcastTestSupport
import Foundation
import MQTT

/// The broker configuration Fleetcast ships in `deploy/mosquitto/`, started for a test as an
/// administrator would install it: a CA, a broker certificate and client certificates made by
/// `openssl`, passwords by `mosquitto_passwd -b`, the shipped ACL copied unchanged, and the
/// shipped `.conf` copied with only its paths and listener edited, line by line (plus what a
/// test broker needs: `user root`, persistence and the log in the test's directories). A
/// change to the shipped files is therefore what the tests run, and a line they rely on that
/// is gone fails the start.
struct ShippedBroker: Sendable {
    /// How clients prove who they are.
    enum Identity: Sendable {
        /// `fleetcast.conf`: a password per user (`password_file`).
        case passwords
        /// `fleetcast-certs.conf`: a client certificate per user, its common name the user name
        /// (`require_certificate`, `use_identity_as_username`).
        case clientCertificates

        /// The shipped configuration file.
        var configurationFile: String {
            switch self {
            case .passwords: "fleetcast.conf"
            case .clientCertificates: "fleetcast-certs.conf"
            }
        }
    }

    /// A shipped line the test needs to edit is missing or repeated.
    struct ShippedFileChanged: Error, CustomStringConvertible {
        let description: String
    }

    /// `deploy/mosquitto` in this checkout.
    static let deployDirectory = RepositoryPath.of("deploy/mosquitto")

    /// The users made: two vehicles and every user of the shipped ACL (a watcher, the two
    /// bridges' reading and publishing logins, the applications that read the bridges).
    static let users = [
        "van-1", "van-2", "watch+dispatch", "bridge+homeassistant", "bridge+homeassistant-pub", "bridge+owntracks",
        "bridge+owntracks-pub", "app+homeassistant", "app+owntracks",
    ]

    /// The running broker: TLS on 127.0.0.1 (the broker certificate names `IP:127.0.0.1` and
    /// `DNS:localhost`).
    let broker: TestBroker
    let identity: Identity
    /// The test's files: certificates, the password file, the copied ACL; the agent's too.
    let files: TemporaryDirectory
    /// The CA that signed the broker's and the clients' certificates.
    let ca: TestCertificateAuthority
    /// User → password (``Identity/passwords``).
    let passwords: [String: String]
    /// User → client certificate whose common name is the user (``Identity/clientCertificates``).
    let certificates: [String: TestCertificateAuthority.Issued]

    /// Runs `body` with the shipped broker for `identity`, and stops it and removes its files
    /// afterwards, whether `body` returns or throws (awaited: a test that ends last must not
    /// leave its broker running when the test process exits).
    static func with<T>(_ identity: Identity, _ body: (ShippedBroker) async throws -> T) async throws -> T {
        let shipped = try await start(identity)
        do {
            let result = try await body(shipped)
            await shipped.shutdown()
            return result
        } catch {
            await shipped.shutdown()
            throw error
        }
    }

    /// Makes the certificates and credentials for ``users`` and starts mosquitto with the
    /// shipped configuration for `identity`.
    static func start(_ identity: Identity) async throws -> ShippedBroker {
        let files = try TemporaryDirectory(prefix: "shipped-broker")
        do {
            return try await start(identity, in: files)
        } catch {
            files.remove()
            throw error
        }
    }

    private static func start(_ identity: Identity, in files: TemporaryDirectory) async throws -> ShippedBroker {
        let ca = try await TestCertificateAuthority.make(named: "ca", in: files.path)
        let server = try await ca.issue(
            commonName: "localhost", subjectAltNames: ["IP:127.0.0.1", "DNS:localhost"], fileName: "broker")
        let acl = files.file("fleetcast.acl")
        try FileManager.default.copyItem(atPath: "\(deployDirectory)/fleetcast.acl", toPath: acl)

        var edits = [
            "cafile": ca.certificateFile, "certfile": server.certificateFile, "keyfile": server.keyFile, "acl_file": acl,
        ]
        var passwords: [String: String] = [:]
        var certificates: [String: TestCertificateAuthority.Issued] = [:]
        switch identity {
        case .passwords:
            let passwordFile = files.file("passwd")
            for (index, user) in users.enumerated() {
                // A bridge's publishing login has its reading login's password (the bridge has one).
                let password =
                    user.hasSuffix("-pub")
                    ? passwords[String(user.dropLast(4))]! : "pw-\(user)-\(UUID().uuidString.prefix(8))"
                passwords[user] = password
                try await TestBroker.runTool(
                    "/usr/bin/mosquitto_passwd", (index == 0 ? ["-c"] : []) + ["-b", passwordFile, user, password], in: files.path)
            }
            edits["password_file"] = passwordFile
        case .clientCertificates:
            for user in users { certificates[user] = try await ca.issue(commonName: user) }
        }

        let shipped = try String(contentsOfFile: "\(deployDirectory)/\(identity.configurationFile)", encoding: .utf8)
        let broker = try await TestBroker.start(tls: true) { port, brokerDirectory in
            var lines = edits
            lines["listener"] = "\(port) 127.0.0.1"
            return try editing(shipped, named: identity.configurationFile, lines) + """

                # Added for the test: mosquitto started as root must stay root to read the test's
                # files; the database and the log go to the test's directory and stderr.
                user root
                persistence_location \(brokerDirectory)/
                log_dest stderr
                log_type all

                """
        }
        return ShippedBroker(
            broker: broker, identity: identity, files: files, ca: ca, passwords: passwords, certificates: certificates)
    }

    /// `configuration` with each line whose option (its first word) is a key of `edits`
    /// replaced by `option value`. Throws when such an option is not there exactly once.
    static func editing(_ configuration: String, named name: String, _ edits: [String: String]) throws -> String {
        var found: [String: Int] = [:]
        let lines = configuration.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard let option = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init),
                let value = edits[option]
            else { return String(line) }
            found[option, default: 0] += 1
            return "\(option) \(value)"
        }
        let wrong = edits.keys.filter { found[$0] != 1 }.sorted()
        guard wrong.isEmpty else {
            throw ShippedFileChanged(description: "deploy/mosquitto/\(name): expected one line each for \(wrong.joined(separator: ", "))")
        }
        return lines.joined(separator: "\n")
    }

    /// `mosquitto_pub`/`mosquitto_sub` arguments that connect as `user`: TLS trusting the CA,
    /// and the user's password or client certificate.
    func login(_ user: String) -> [String] {
        switch identity {
        case .passwords:
            return trustOnly + ["-u", user, "-P", passwords[user] ?? ""]
        case .clientCertificates:
            guard let certificate = certificates[user] else { return trustOnly }
            return trustOnly + ["--cert", certificate.certificateFile, "--key", certificate.keyFile]
        }
    }

    /// `mosquitto_sub` on `filter` logged in as `user`, for `count` messages (see
    /// ``MosquittoCLI/subscribe(broker:filter:count:timeoutSeconds:extra:loggedAs:)``): the
    /// broker knows it by the user name (`use_username_as_clientid`).
    func subscribe(
        as user: String, _ filter: String, count: Int, timeoutSeconds: Int = 30, extra: [String] = []
    ) async throws -> MosquittoCLI.Subscriber {
        try await MosquittoCLI.subscribe(
            broker: broker, filter: filter, count: count, timeoutSeconds: timeoutSeconds, extra: login(user) + extra, loggedAs: user)
    }

    /// Fleetcast's own MQTT client's settings to log in as `user` (client id `user`, as the broker
    /// makes it anyway).
    func mqttConfiguration(as user: String) throws -> MQTTConfiguration {
        var configuration = MQTTConfiguration(
            broker: try BrokerURL(parsing: "mqtts://\(user)@127.0.0.1:\(broker.port)"), clientID: user, password: passwords[user])
        let certificate = certificates[user]
        configuration.tls = MQTTTLSConfiguration(
            caFile: ca.certificateFile, certificateFile: certificate?.certificateFile, keyFile: certificate?.keyFile)
        return configuration
    }

    /// Arguments that connect over TLS trusting the CA, with no credentials at all.
    var trustOnly: [String] { ["--cafile", ca.certificateFile] }

    /// Stops the broker and removes the test's files.
    func shutdown() async {
        await broker.shutdown()
        files.remove()
    }
}

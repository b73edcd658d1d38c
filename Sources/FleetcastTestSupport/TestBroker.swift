import Foundation

/// A real `/usr/sbin/mosquitto` on a free loopback port, configured for one test: plain or
/// TLS (CA and server certificate made with `openssl`), optional password file (made with
/// `mosquitto_passwd -b`) and ACL, `user root`, persistence off. Start it with
/// ``start(_:)``, or with a configuration the test wrote (the shipped `deploy/mosquitto` files,
/// say) with ``start(tls:host:configuration:)``; ``stop()``, ``kill()`` and ``restart()``
/// (same port) control it;
/// ``shutdown()`` stops it and deletes its directory (`deinit` kills and cleans up too).
public final class TestBroker: Sendable {
    /// What the broker offers.
    public struct Options: Sendable {
        /// Serve MQTT over TLS with a certificate for `localhost` signed by a test CA.
        public var tls: Bool
        /// User name → password; when non-empty, anonymous clients are refused.
        public var users: [String: String]
        /// With `tls`: refuse clients without a certificate signed by the test CA.
        public var requireClientCertificate: Bool
        /// The text of an ACL file (mosquitto syntax), if any.
        public var acl: String?
        /// More configuration lines.
        public var extraConfiguration: [String]

        /// Creates options (plain TCP, anonymous allowed by default).
        public init(
            tls: Bool = false, requireClientCertificate: Bool = false, users: [String: String] = [:], acl: String? = nil,
            extraConfiguration: [String] = []
        ) {
            self.tls = tls
            self.requireClientCertificate = requireClientCertificate
            self.users = users
            self.acl = acl
            self.extraConfiguration = extraConfiguration
        }
    }

    /// Files made for a TLS broker.
    public struct Certificates: Sendable {
        /// The CA that signed the server certificate (PEM).
        public var caFile: String
        /// Another CA, which did not sign it: a client trusting only this must refuse the broker.
        public var otherCAFile: String
        /// The server certificate (subject alternative name `DNS:localhost` only).
        public var serverCertificateFile: String
        /// The server key.
        public var serverKeyFile: String
        /// A client certificate signed by the CA (for `requireClientCertificate`).
        public var clientCertificateFile: String
        /// The client certificate's key.
        public var clientKeyFile: String
    }

    /// The loopback port the broker listens on (kept across restarts).
    public let port: Int
    /// The temp directory holding the configuration, certificates, logs.
    public let directory: String
    /// The TLS files, when `options.tls`.
    public let certificates: Certificates?
    /// The host to connect to: `localhost` for TLS (the name in the certificate), else 127.0.0.1.
    public let host: String
    /// The URL clients use: `mqtt://127.0.0.1:port` or `mqtts://localhost:port` (with
    /// ``start(tls:host:configuration:)``, the host and scheme it was given).
    public let url: String
    private let configurationPath: String
    private let current: Locked<(process: TestProcess?, generation: Int)>

    private init(port: Int, directory: String, certificates: Certificates?, tls: Bool, host: String, configurationPath: String) {
        self.port = port
        self.directory = directory
        self.certificates = certificates
        self.host = host
        self.url = "\(tls ? "mqtts" : "mqtt")://\(host):\(port)"
        self.configurationPath = configurationPath
        self.current = Locked((nil, 0))
    }

    deinit {
        current.withLock { $0.process?.send(SIGKILL, toGroup: true) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Writes the configuration (and certificates, password file, ACL), starts mosquitto and
    /// waits until it accepts connections.
    public static func start(_ options: Options = Options()) async throws -> TestBroker {
        try await onSomeFreePort { try await startOnce(options) }
    }

    /// Starts mosquitto with a configuration the test wrote, and waits until it accepts
    /// connections. `configuration` gets the free port chosen and the broker's own temp
    /// directory (for persistence) and returns the file's text. That configuration must listen
    /// on the port on 127.0.0.1, say `user root` (else mosquitto drops to the user `mosquitto`
    /// and cannot read the test's files) and log to stderr with `log_type all`
    /// (``MosquittoCLI/subscribe(broker:filter:count:timeoutSeconds:extra:)`` reads the log).
    /// `tls` and `host` make ``url``; ``certificates`` is nil (the test made its own).
    public static func start(
        tls: Bool, host: String = "127.0.0.1", configuration: (_ port: Int, _ directory: String) throws -> String
    ) async throws -> TestBroker {
        try await onSomeFreePort {
            let directory = try makeTemporaryDirectory(prefix: "fleetcast-broker")
            do {
                let port = try FreePort.next()
                let configurationPath = "\(directory)/mosquitto.conf"
                try configuration(port, directory).write(toFile: configurationPath, atomically: true, encoding: .utf8)
                let broker = TestBroker(
                    port: port, directory: directory, certificates: nil, tls: tls, host: host, configurationPath: configurationPath)
                try await broker.launch()
                return broker
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        }
    }

    /// Runs `start` again (3 attempts) when mosquitto exits at start: a free port can be taken
    /// by a parallel test between `FreePort.next()` and mosquitto's bind.
    private static func onSomeFreePort(_ start: () async throws -> TestBroker) async throws -> TestBroker {
        var attempt = 1
        while true {
            do {
                return try await start()
            } catch TestSupportError.processFailed(let command, let status, let output) where attempt < 3 {
                _ = (command, status, output)
                attempt += 1
            }
        }
    }

    private static func startOnce(_ options: Options) async throws -> TestBroker {
        let directory = try makeTemporaryDirectory(prefix: "fleetcast-broker")
        do {
            let port = try FreePort.next()
            var lines = [
                "user root",
                "persistence false",
                "log_dest stderr",
                "log_type all",
                "listener \(port) 127.0.0.1",
            ]
            var certificates: Certificates?
            if options.tls {
                let made = try await makeCertificates(in: directory)
                certificates = made
                lines += ["cafile \(made.caFile)", "certfile \(made.serverCertificateFile)", "keyfile \(made.serverKeyFile)"]
                if options.requireClientCertificate { lines.append("require_certificate true") }
            }
            if options.users.isEmpty {
                lines.append("allow_anonymous true")
            } else {
                let passwordFile = "\(directory)/passwords"
                for (index, (user, password)) in options.users.sorted(by: { $0.key < $1.key }).enumerated() {
                    let create = index == 0 ? ["-c"] : []
                    try await runTool("/usr/bin/mosquitto_passwd", create + ["-b", passwordFile, user, password], in: directory)
                }
                lines += ["allow_anonymous false", "password_file \(passwordFile)"]
            }
            if let acl = options.acl {
                let aclFile = "\(directory)/acl"
                try acl.write(toFile: aclFile, atomically: true, encoding: .utf8)
                lines.append("acl_file \(aclFile)")
            }
            lines += options.extraConfiguration
            let configurationPath = "\(directory)/mosquitto.conf"
            try (lines.joined(separator: "\n") + "\n").write(toFile: configurationPath, atomically: true, encoding: .utf8)
            let broker = TestBroker(
                port: port, directory: directory, certificates: certificates, tls: certificates != nil,
                host: certificates == nil ? "127.0.0.1" : "localhost", configurationPath: configurationPath)
            try await broker.launch()
            return broker
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    private func launch() async throws {
        let generation = current.withLock { state -> Int in
            state.generation += 1
            return state.generation
        }
        let process = try TestProcess(
            "/usr/sbin/mosquitto", ["-c", configurationPath], directory: directory, name: "mosquitto-\(generation)")
        current.withLock { $0.process = process }
        let port = self.port
        try await waitUntil("mosquitto to accept connections on port \(port)", timeout: .seconds(10)) {
            guard process.isRunning else {
                throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
            }
            // Ours, not another test's broker that took the port first: mosquitto says
            // "running" only once its listeners are bound (it exits on "Address already in use").
            return process.standardError.contains(" running") && FreePort.isAccepting(port)
        }
    }

    /// Stops the broker gracefully (SIGTERM; SIGKILL after 5 s) and waits for it to exit.
    public func stop() async {
        let process = current.withLock { state in
            defer { state.process = nil }
            return state.process
        }
        await process?.stop()
    }

    /// Kills the broker (SIGKILL): clients see their connection drop, no DISCONNECT. Waits
    /// (at most 10 s) for it to exit.
    public func kill() async {
        let process = current.withLock { state in
            defer { state.process = nil }
            return state.process
        }
        process?.send(SIGKILL, toGroup: true)
        _ = try? await process?.waitForExit(timeout: .seconds(10))
    }

    /// Starts the broker again on the same port with the same configuration (after
    /// ``stop()`` or ``kill()``; stops it first if it is running).
    public func restart() async throws {
        await stop()
        try await launch()
    }

    /// Stops the broker and removes its directory.
    public func shutdown() async {
        await stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The broker's log so far (all generations).
    public var log: String {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.filter { $0.hasPrefix("mosquitto-") && $0.hasSuffix(".stderr") }.sorted()
            .compactMap { try? String(contentsOfFile: "\(directory)/\($0)", encoding: .utf8) }
            .joined()
    }

    private static func makeCertificates(in directory: String) async throws -> Certificates {
        let ca = try await TestCertificateAuthority.make(named: "ca", in: directory)
        let otherCA = try await TestCertificateAuthority.make(named: "other-ca", in: directory)
        let server = try await ca.issue(commonName: "localhost", subjectAltNames: ["DNS:localhost"], fileName: "server")
        let client = try await ca.issue(commonName: "fleetcast-test-client", fileName: "client")
        return Certificates(
            caFile: ca.certificateFile, otherCAFile: otherCA.certificateFile,
            serverCertificateFile: server.certificateFile, serverKeyFile: server.keyFile,
            clientCertificateFile: client.certificateFile, clientKeyFile: client.keyFile)
    }

    /// Runs a tool to completion; throws with its stderr when it fails, and
    /// ``TestSupportError/timedOut(_:_:)`` (after stopping it) when it takes over `timeout`.
    /// Its stdout and stderr files in `directory` are removed afterwards.
    public static func runTool(
        _ executable: String, _ arguments: [String], in directory: String, timeout: Duration = .seconds(30)
    ) async throws {
        let name = "tool-\(UUID().uuidString)"
        let process = try TestProcess(executable, arguments, directory: directory, name: name)
        defer {
            try? FileManager.default.removeItem(atPath: process.stdoutPath)
            try? FileManager.default.removeItem(atPath: process.stderrPath)
        }
        let status = try await process.waitForExitOrStop(timeout: timeout)
        let errorText = process.standardError
        guard status == 0 else {
            throw TestSupportError.processFailed(process.commandLine, status: status, output: errorText)
        }
    }
}

/// Runs `body` with a freshly started broker, shutting the broker down afterwards whether
/// `body` returns or throws.
public func withBroker<T>(_ options: TestBroker.Options = .init(), _ body: (TestBroker) async throws -> T) async throws -> T {
    let broker = try await TestBroker.start(options)
    do {
        let result = try await body(broker)
        await broker.shutdown()
        return result
    } catch {
        await broker.shutdown()
        throw error
    }
}

/// Makes a fresh private directory under the system temp directory.
public func makeTemporaryDirectory(prefix: String) throws -> String {
    try TemporaryDirectory(prefix: prefix).path
}

/// A fresh private directory under the system temp directory, removed by ``remove()``.
public struct TemporaryDirectory: Sendable {
    /// Its absolute path.
    public let path: String

    /// Creates the directory, named `prefix-UUID`.
    public init(prefix: String = "fleetcast-test") throws {
        path = "\(NSTemporaryDirectory())/\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `name` inside it.
    public func file(_ name: String) -> String { "\(path)/\(name)" }

    /// Writes `text` to the file `name` (with permissions `mode`) and returns its path. Throws
    /// when the file cannot be written: said here, not in whatever the test finds missing later.
    @discardableResult
    public func createFile(_ name: String, _ text: String, mode: Int = 0o644) throws -> String {
        let target = file(name)
        guard FileManager.default.createFile(atPath: target, contents: Data(text.utf8), attributes: [.posixPermissions: mode]) else {
            throw TestSupportError.cannotWrite(target)
        }
        return target
    }

    /// The text of the file `name`, or nil when it cannot be read.
    public func contents(_ name: String) -> String? {
        try? String(contentsOfFile: file(name), encoding: .utf8)
    }

    /// Removes it and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

import Foundation

/// A real PostgreSQL server from Debian's `postgresql` package, made for one test with
/// `initdb` in a temporary directory and started on a free loopback port; ``shutdown()``
/// stops it (fast shutdown) and deletes its directory (`deinit` kills it and cleans up too).
///
/// PostgreSQL refuses to run as root: as root the directory is given to the user `postgres`
/// (made by the package) and the server and `initdb` run as that user through `runuser`.
/// Clients connect over TCP as ``user`` with the password ``password`` (SCRAM-SHA-256), or
/// with `trust` when started with `password: nil`.
public final class TestPostgres: Sendable {
    /// The loopback port the server listens on.
    public let port: Int
    /// The database role the tests connect as (a superuser).
    public let user: String
    /// Its password, or `nil` when the server trusts loopback connections.
    public let password: String?
    /// The temporary directory holding the cluster, the socket and the log.
    public let directory: String
    /// With `tls`: the CA that signed the server's certificate (for `localhost` and 127.0.0.1).
    public let caFile: String?
    /// The running server (a new one after ``stop()`` and ``start()``), and how to start it.
    private let server: Locked<TestProcess>
    private let command: (executable: String, arguments: [String])
    private var process: TestProcess { server.withLock { $0 } }

    private init(
        port: Int, user: String, password: String?, directory: String, caFile: String?, process: TestProcess,
        command: (String, [String])
    ) {
        self.port = port
        self.user = user
        self.password = password
        self.directory = directory
        self.caFile = caFile
        self.server = Locked(process)
        self.command = command
    }

    deinit {
        process.send(SIGKILL, toGroup: true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The folder of the newest installed server's binaries (`/usr/lib/postgresql/<major>/bin`),
    /// or `nil` when no server is installed.
    public static var binaries: String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        guard let newest = versions.last else { return nil }
        let bin = "\(root)/\(newest)/bin"
        return FileManager.default.isExecutableFile(atPath: "\(bin)/postgres") ? bin : nil
    }

    /// `postgres://user[:password]@127.0.0.1:port/database`.
    public func url(database: String = "postgres") -> String {
        let credentials = password.map { "\(user):\($0)" } ?? user
        return "postgres://\(credentials)@127.0.0.1:\(port)/\(database)"
    }

    /// Makes a cluster with `initdb` and starts it; returns once it accepts connections.
    ///
    /// - Parameters:
    ///   - password: the role's password (loopback clients must give it, SCRAM-SHA-256), or
    ///     `nil` to trust loopback clients.
    ///   - durable: `false` (tests) turns off fsync and synchronous commit, which only matter
    ///     when the machine loses power; a benchmark measures with them on.
    ///   - tls: serve TLS (`ssl=on`) with a certificate signed by a CA made for the test
    ///     (``caFile``), as Debian's own clusters serve their self-signed one.
    public static func start(password: String? = "fleetcast-test", durable: Bool = false, tls: Bool = false) async throws -> TestPostgres {
        guard let bin = binaries else {
            throw TestSupportError.processFailed("postgres", status: -1, output: "no PostgreSQL server under /usr/lib/postgresql")
        }
        var attempt = 1
        while true {
            do {
                return try await startOnce(bin: bin, password: password, durable: durable, tls: tls)
            } catch TestSupportError.processFailed(let command, let status, let output) where attempt < 3 {
                // A free port can be taken by a parallel test before the server binds it.
                _ = (command, status, output)
                attempt += 1
            }
        }
    }

    private static func startOnce(bin: String, password: String?, durable: Bool, tls: Bool) async throws -> TestPostgres {
        let directory = try makeTemporaryDirectory(prefix: "fleetcast-postgres")
        do {
            let asRoot = geteuid() == 0
            if asRoot {
                try await TestBroker.runTool("/usr/bin/chown", ["postgres:postgres", directory], in: "/tmp")
            }
            // As root, every command runs as `postgres` (whose output files it must be able to write).
            func command(_ executable: String, _ arguments: [String]) -> (String, [String]) {
                asRoot ? ("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments) : (executable, arguments)
            }
            let user = "fleetcast"
            var initdb = ["-D", "\(directory)/data", "-U", user, "--encoding=UTF8", "--locale=C", "--no-sync", "--auth-local=trust"]
            if let password {
                let passwordFile = "\(directory)/password"
                try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
                if asRoot { try await TestBroker.runTool("/usr/bin/chown", ["postgres:postgres", passwordFile], in: "/tmp") }
                initdb += ["--pwfile=\(passwordFile)", "--auth-host=scram-sha-256"]
            } else {
                initdb += ["--auth-host=trust"]
            }
            let (initExecutable, initArguments) = command("\(bin)/initdb", initdb)
            let setup = try TestProcess(initExecutable, initArguments, directory: directory, name: "initdb")
            let status = try await setup.waitForExit(timeout: .seconds(60))
            guard status == 0 else {
                throw TestSupportError.processFailed(setup.commandLine, status: status, output: setup.standardError)
            }

            let port = try FreePort.next()
            var settings = [
                "-D", "\(directory)/data", "-p", "\(port)", "-k", directory, "-c", "listen_addresses=127.0.0.1",
                "-c", "max_connections=40", "-c", "shared_buffers=64MB",
            ]
            if !durable { settings += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"] }
            var caFile: String?
            if tls {
                let ca = try await TestCertificateAuthority.make(named: "postgres-ca", in: directory)
                let server = try await ca.issue(
                    commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"], fileName: "postgres-server")
                // The server reads its key only if it owns it and no one else may read it.
                if asRoot {
                    try await TestBroker.runTool(
                        "/usr/bin/chown", ["postgres:postgres", server.certificateFile, server.keyFile], in: "/tmp")
                }
                try await TestBroker.runTool("/usr/bin/chmod", ["0600", server.keyFile], in: "/tmp")
                settings += ["-c", "ssl=on", "-c", "ssl_cert_file=\(server.certificateFile)", "-c", "ssl_key_file=\(server.keyFile)"]
                caFile = ca.certificateFile
            }
            let (serverExecutable, serverArguments) = command("\(bin)/postgres", settings)
            let server = try TestProcess(serverExecutable, serverArguments, directory: directory, name: "postgres")
            let postgres = TestPostgres(
                port: port, user: user, password: password, directory: directory, caFile: caFile, process: server,
                command: (serverExecutable, serverArguments))
            try await postgres.waitUntilReady(server)
            return postgres
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// Runs SQL with `psql` as ``user`` (for a test's own checks, independent of the code
    /// under test) and returns its unaligned, tuples-only output: one line per row, columns
    /// separated by `|`.
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        let name = "psql-\(UUID().uuidString)"
        let client = try TestProcess(
            "/usr/bin/psql",
            ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(port)", "-U", user, "-d", database, "-c", sql],
            directory: directory, name: name, environment: password.map { ["PGPASSWORD": $0] } ?? [:])
        defer {
            try? FileManager.default.removeItem(atPath: client.stdoutPath)
            try? FileManager.default.removeItem(atPath: client.stderrPath)
        }
        let status = try await client.waitForExit(timeout: .seconds(60))
        guard status == 0 else { throw TestSupportError.processFailed(client.commandLine, status: status, output: client.standardError) }
        return client.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Creates an empty database and returns its name.
    public func createDatabase(_ name: String = "fleet_\(UInt32.random(in: 0...UInt32.max))") async throws -> String {
        _ = try await psql("CREATE DATABASE \(name)")
        return name
    }

    /// The server's log so far.
    public var log: String { process.standardError }

    /// Kills the server (SIGKILL, as a power cut would), without cleaning up.
    public func kill() async {
        process.send(SIGKILL, toGroup: true)
        _ = try? await process.waitForExit(timeout: .seconds(10))
    }

    /// Freezes the server (SIGSTOP to each of its processes): its connections stay open and it
    /// answers nothing, as a hung host would, until ``resume()``. (Each backend is a session
    /// of its own, so the server's process group does not reach them.)
    public func pause() {
        // The postmaster first: stopped, it starts no process that the list would miss.
        guard let postmaster = postmasterPID() else { return }
        Foundation.kill(postmaster, SIGSTOP)
        for pid in children(of: postmaster) { Foundation.kill(pid, SIGSTOP) }
    }

    /// Lets a ``pause()``d server run on.
    public func resume() {
        guard let postmaster = postmasterPID() else { return }
        for pid in children(of: postmaster) { Foundation.kill(pid, SIGCONT) }
        Foundation.kill(postmaster, SIGCONT)
    }

    /// The postmaster's pid: its pid file's first line.
    private func postmasterPID() -> pid_t? {
        guard let pidFile = try? String(contentsOfFile: "\(directory)/data/postmaster.pid", encoding: .utf8),
            let first = pidFile.split(separator: "\n").first
        else { return nil }
        return pid_t(first)
    }

    /// The processes `parent` started, from /proc (a process's parent is the fourth field of
    /// its `stat`, after the name's `)`).
    private func children(of parent: pid_t) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == parent ? pid : nil
        }
    }

    /// Stops the server (fast shutdown), keeping its data: an outage, until ``start()``.
    public func stop() async {
        resume()  // a paused server would not act on SIGINT
        process.send(SIGINT, toGroup: true)
        if (try? await process.waitForExit(timeout: .seconds(10))) == nil { process.send(SIGKILL, toGroup: true) }
    }

    /// Starts the stopped server again, on the same port with the same data; returns once it
    /// accepts connections.
    public func start() async throws {
        let restarted = try TestProcess(command.executable, command.arguments, directory: directory, name: "postgres")
        server.withLock { $0 = restarted }
        try await waitUntilReady(restarted)
    }

    private func waitUntilReady(_ server: TestProcess) async throws {
        let (port, directory) = (self.port, self.directory)
        try await waitUntil("PostgreSQL to accept connections on port \(port)", timeout: .seconds(30)) {
            guard server.isRunning else {
                throw TestSupportError.processFailed(server.commandLine, status: -1, output: server.standardError)
            }
            // The port opens before the server has finished starting up: `pg_isready` asks it.
            guard FreePort.isAccepting(port) else { return false }
            let ready = try TestProcess(
                "/usr/bin/pg_isready", ["-q", "-h", "127.0.0.1", "-p", "\(port)"], directory: directory, name: "pg_isready")
            return try await ready.waitForExit(timeout: .seconds(10)) == 0
        }
    }

    /// Stops the server (SIGINT: PostgreSQL's fast shutdown) and removes its directory.
    public func shutdown() async {
        resume()  // a paused server would not act on SIGINT
        process.send(SIGINT, toGroup: true)
        if (try? await process.waitForExit(timeout: .seconds(10))) == nil { process.send(SIGKILL, toGroup: true) }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` with a PostgreSQL started for it (see ``TestPostgres/start(password:durable:tls:)``)
/// and stops it and removes its directory afterwards, also when `body` throws: no server is
/// left running when the test process exits.
public func withPostgres<T>(
    password: String? = "fleetcast-test", durable: Bool = false, tls: Bool = false, _ body: (TestPostgres) async throws -> T
) async throws -> T {
    let postgres = try await TestPostgres.start(password: password, durable: durable, tls: tls)
    do {
        let result = try await body(postgres)
        await postgres.shutdown()
        return result
    } catch {
        await postgres.shutdown()
        throw error
    }
}

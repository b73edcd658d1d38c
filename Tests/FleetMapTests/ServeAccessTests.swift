import FleetMap
import FleetcastTestSupport
import Foundation
import Testing

/// The Host rule against DNS rebinding, without a server.
@Suite struct HostAllowListTests {
    let list = HostAllowList(listenHost: "fleet-server", allowed: ["dispatch.example.com"])

    @Test func addressesLocalhostTheListenNameAndAllowedNamesAreAnswered() {
        for host in [
            "127.0.0.1", "127.0.0.1:8080", "192.0.2.7:80", "[::1]:8080", "[2001:db8::1]", "localhost", "LOCALHOST:8080",
            "fleet-server:8080", "dispatch.example.com", "Dispatch.Example.COM.:443",
        ] {
            #expect(list.allows(host), "\(host)")
        }
    }

    @Test func otherNamesAndMalformedHostsAreRefused() {
        for host in [
            "attacker.example", "attacker.example:8080", "localhost.attacker.example", "dispatch.example.com.attacker.example", "",
            "[::1", "127.0.0.1:80:80", "localhost:", "localhost:http", "[::1]x", "fleet-server@evil", "256.1.1.1",
        ] {
            #expect(!list.allows(host), "\(host)")
        }
        #expect(!list.allows(nil))
    }
}

/// The users and token files, read as the server reads them.
@Suite struct MapCredentialsTests {
    @Test func anHtpasswdFileOfBcryptHashesIsRead() throws {
        let hash = "$2y$05$xyA2Kz7y3JEQ0yyAZ3SemeXX7Md6B3g5YlXZfhmDQNs1Y.YrjnyxW"
        let users = try MapAccess.users(htpasswd: "# dispatchers\n\ndispatcher:\(hash)\r\nnight:\(hash)\n", file: "users")
        #expect(users.keys.sorted() == ["dispatcher", "night"])
        // htpasswd's $2y$ is handed to bcrypt as the same algorithm's $2b$.
        #expect(users["dispatcher"] == "$2b$" + hash.dropFirst(4))
    }

    @Test func weakOrMalformedUserLinesAreRefusedWithTheirLine() {
        let cases: [(String, String)] = [
            ("dispatcher:$apr1$abc$0123456789abcdef012345", "users, line 1: not a bcrypt hash"),
            ("ok:$2y$05$xyA2Kz7y3JEQ0yyAZ3SemeXX7Md6B3g5YlXZfhmDQNs1Y.YrjnyxW\nplainpassword", "users, line 2: not name:hash"),
            ("dispatcher:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "users, line 1: not a bcrypt hash"),
            ("# nobody\n", "users: no user"),
        ]
        for (text, message) in cases {
            let error = #expect(throws: MapAccess.InvalidCredentials.self) { try MapAccess.users(htpasswd: text, file: "users") }
            #expect(error?.description.hasPrefix(message) == true, "\(String(describing: error))")
            #expect(error?.description.contains("$") == false, "no hash in the message")
        }
    }

    @Test func tokensAreLongVisibleASCIILines() throws {
        #expect(
            try MapAccess.tokens(text: "# scripts\n0123456789abcdef0123\n  fedcba9876543210fedc  \n", file: "t") == [
                "0123456789abcdef0123", "fedcba9876543210fedc",
            ])
        #expect(throws: MapAccess.InvalidCredentials.self) { try MapAccess.tokens(text: "short\n", file: "t") }
        #expect(throws: MapAccess.InvalidCredentials.self) { try MapAccess.tokens(text: "0123456789 abcdef0123\n", file: "t") }
        #expect(throws: MapAccess.InvalidCredentials.self) { try MapAccess.tokens(text: "\n", file: "t") }
    }

    @Test func tokensAreComparedWholly() {
        let token = Array("0123456789abcdef0123".utf8)
        #expect(MapTokens.constantTimeEqual(token, token))
        #expect(!MapTokens.constantTimeEqual(token, Array(token.dropLast())))
        #expect(!MapTokens.constantTimeEqual(token, Array("0123456789abcdef0124".utf8)))
        let tokens = MapTokens(["0123456789abcdef0123", "fedcba9876543210fedc"])
        #expect(tokens.matches("fedcba9876543210fedc") && !tokens.matches("fedcba9876543210fedd") && !tokens.matches(""))
    }
}

/// `fleet-watch serve`, the built executable, with a real agent and mosquitto, fetched with curl:
/// who it answers (Host), whom it serves (basic and bearer authentication) and over what (HTTPS).
@Suite(.serialized) struct ServeAccessTests {
    static let password = "correct horse battery staple"
    static let token = "f1eet0token0for0scripts0a1b2c3d4"

    /// Runs curl and returns its exit status, the HTTP status it saw, and the body (headers
    /// first when `-D -` is among the arguments).
    static func curl(_ arguments: [String], directory: String) async throws -> (exit: Int32, status: String, body: String) {
        let process = try TestProcess(
            "/usr/bin/curl", ["-sS", "--max-time", "15", "-w", "\n%{http_code}"] + arguments, directory: directory,
            name: "curl-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(atPath: process.stdoutPath)
            try? FileManager.default.removeItem(atPath: process.stderrPath)
        }
        let exit = try await process.waitForExit(timeout: .seconds(30))
        var body = process.standardOutput
        let status = body.split(separator: "\n").last.map(String.init) ?? ""
        if let newline = body.lastIndex(of: "\n") { body = String(body[..<newline]) }
        return (exit, status, body)
    }

    /// An agent on the simulator and `fleet-watch serve` with `arguments`, until the server says
    /// it listens.
    static func start(_ broker: TestBroker, port: Int, arguments: [String]) async throws -> (agent: TestProcess, server: TestProcess) {
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=5&speed=15&lat=48.85&lon=2.35", "--vehicle", "van-1", "--broker", broker.url,
                "--state-dir", "\(broker.directory)/state-van-1",
            ], directory: broker.directory, name: "agent-van-1", environment: agentEveryFixEnvironment)
        let server = try TestProcess(
            builtProduct("fleet-watch"), ["serve", "--broker", broker.url, "--tiles", "none"] + arguments,
            directory: broker.directory, name: "serve-\(UUID().uuidString.prefix(8))")
        do {
            try await waitUntilServeListens(server)
        } catch {
            await agent.stop()
            throw error
        }
        return (agent, server)
    }

    /// ``start(_:port:arguments:)``, then `body` with the server; the server and the agent are
    /// stopped after it, whether it throws or not.
    static func withServer(
        _ broker: TestBroker, port: Int, arguments: [String], _ body: (_ server: TestProcess) async throws -> Void
    ) async throws {
        let (agent, server) = try await start(broker, port: port, arguments: arguments)
        do {
            try await body(server)
        } catch {
            await server.stop()
            await agent.stop()
            throw error
        }
        await server.stop()
        await agent.stop()
    }

    @Test func overHTTPSOnlyAllowedHostsAndAuthenticatedUsersOrTokensSeeTheFleet() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let authority = try await TestCertificateAuthority.make(in: directory)
            let certificate = try await authority.issue(commonName: "localhost", subjectAltNames: ["DNS:localhost", "IP:127.0.0.1"])
            // The users file as an administrator makes it: Apache's htpasswd, bcrypt.
            try await TestBroker.runTool(
                "/usr/bin/htpasswd", ["-B", "-b", "-c", "\(directory)/users", "dispatcher", Self.password], in: directory)
            try "# the nightly export\n\(Self.token)\n".write(toFile: "\(directory)/tokens", atomically: true, encoding: .utf8)
            for file in ["users", "tokens"] { chmod("\(directory)/\(file)", 0o600) }
            let port = try FreePort.next()
            try await Self.withServer(
                broker, port: port,
                arguments: [
                    "--listen", "127.0.0.1:\(port)", "--allowed-host", "fleet.example", "--users-file", "\(directory)/users",
                    "--token-file", "\(directory)/tokens", "--tls-certificate", certificate.certificateFile, "--tls-key",
                    certificate.keyFile,
                ]
            ) { server in
                let url = "https://localhost:\(port)"
                let tls = ["--cacert", authority.certificateFile]
                #expect(server.standardError.contains("http.address=https://127.0.0.1:\(port)/"), "\(server.standardError)")

                // No credentials: 401, and the challenge that makes a browser ask.
                let anonymous = try await Self.curl(tls + ["-D", "-", "\(url)/"], directory: directory)
                #expect(anonymous.status == "401")
                #expect(anonymous.body.contains(#"WWW-Authenticate: Basic realm="fleet-watch""#), "\(anonymous.body)")
                #expect(!anonymous.body.contains("<html"))
                for path in ["/api/vehicles", "/events", "/leaflet/leaflet.js", "/map.js"] {
                    #expect(try await Self.curl(tls + ["\(url)\(path)"], directory: directory).status == "401", "\(path)")
                }
                #expect(try await Self.curl(tls + ["-u", "dispatcher:wrong", "\(url)/"], directory: directory).status == "401")
                #expect(
                    try await Self.curl(
                        tls + ["-H", "Authorization: Bearer \(Self.token.dropLast())x", "\(url)/api/vehicles"], directory: directory
                    )
                    .status == "401")

                // The dispatcher's password: the page, and the vehicle, live.
                let user = ["-u", "dispatcher:\(Self.password)"]
                let page = try await Self.curl(tls + user + ["\(url)/"], directory: directory)
                #expect(page.status == "200" && page.body.contains(#"id="config""#))
                try await waitUntil("van-1 on the map", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await Self.curl(tls + user + ["\(url)/api/vehicles"], directory: directory).body.contains(#""id":"van-1""#)
                }
                let stream = try await Self.curl(tls + user + ["-N", "--max-time", "3", "\(url)/events"], directory: directory)
                #expect(stream.body.contains("event: snapshot") && stream.body.contains(#""id":"van-1""#), "\(stream.body.prefix(500))")

                // The token, for a script.
                let scripted = try await Self.curl(
                    tls + ["-H", "Authorization: Bearer \(Self.token)", "\(url)/api/vehicles"], directory: directory)
                #expect(scripted.status == "200" && scripted.body.contains(#""id":"van-1""#))

                // Hosts: an allowed name is answered, a rebinding name is not, credentials or not.
                #expect(
                    try await Self.curl(tls + user + ["-H", "Host: fleet.example:\(port)", "\(url)/"], directory: directory).status == "200"
                )
                let rebound = try await Self.curl(
                    tls + user + ["-H", "Host: attacker.example", "\(url)/api/vehicles"], directory: directory)
                #expect(rebound.status == "421" && !rebound.body.contains("van-1"))

                // Plain HTTP on the HTTPS port gets nothing.
                let plain = try await Self.curl(["http://127.0.0.1:\(port)/api/vehicles"] + user, directory: directory)
                #expect(plain.status != "200")

                // No secret in the log.
                for secret in [Self.password, Self.token] { #expect(!server.standardError.contains(secret)) }
                #expect(server.isRunning)
            }
        }
    }

    @Test func withoutAuthenticationOnAllAddressesItWarnsAndStillRefusesRebindingOnce() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let port = try FreePort.next()
            try await Self.withServer(broker, port: port, arguments: ["--listen", "0.0.0.0:\(port)"]) { server in
                #expect(server.standardError.contains("without authentication on a non-loopback address"), "\(server.standardError)")
                let url = "http://127.0.0.1:\(port)/api/vehicles"
                #expect(try await Self.curl([url], directory: directory).status == "200")
                #expect(try await Self.curl(["-H", "Host: 192.0.2.10:\(port)", url], directory: directory).status == "200")
                for path in ["/", "/api/vehicles", "/events"] {
                    let foreign = try await Self.curl(
                        ["-H", "Host: rebind.example", "http://127.0.0.1:\(port)\(path)"], directory: directory)
                    #expect(foreign.status == "421" && !foreign.body.contains("van-1"), "\(path)")
                    let own = try await Self.curl(
                        ["--max-time", "2", "-H", "Host: 127.0.0.1:\(port)", "http://127.0.0.1:\(port)\(path)"], directory: directory)
                    #expect(own.status == "200", "\(path)")
                }
                let refusals = server.standardError.split(separator: "\n").filter { $0.contains("Refused a request for a host name") }
                #expect(refusals.count == 1, "said once: \(refusals)")
                // A name with a terminal escape is refused (by the HTTP parser or the allow-list)
                // and never reaches the log raw.
                let escape = try await Self.curl(["-H", "Host: rebind\u{1B}]0;owned\u{07}.example", url], directory: directory)
                #expect(["400", "421"].contains(escape.status))
                #expect(!server.standardError.contains("\u{1B}") && !server.standardError.contains("\u{07}"))
            }
        }
    }

    @Test func unusableCredentialsAndTLSFilesAreRefusedAtStartUpWithoutTheirContent() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-serve-access")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "dispatcher:$apr1$salt$0123456789abcdefghijkl\n".write(toFile: "\(directory)/md5", atomically: true, encoding: .utf8)
        try "hunter2\n".write(toFile: "\(directory)/short", atomically: true, encoding: .utf8)
        let cases: [([String], String)] = [
            (["--users-file", "\(directory)/md5"], "\(directory)/md5, line 1: not a bcrypt hash"),
            (["--users-file", "\(directory)/missing"], "cannot read \(directory)/missing"),
            (["--token-file", "\(directory)/short"], "\(directory)/short, line 1: a token is at least 16"),
            (["--tls-certificate", "\(directory)/md5"], "--tls-certificate and --tls-key go together"),
            (["--tls-certificate", "\(directory)/md5", "--tls-key", "\(directory)/md5"], "--tls-certificate/--tls-key: cannot load"),
            (["--allowed-host", "https://fleet.example"], "--allowed-host"),
        ]
        for (arguments, reason) in cases {
            let process = try TestProcess(
                builtProduct("fleet-watch"), ["serve", "--broker", "mqtt://127.0.0.1:1"] + arguments, directory: directory,
                name: "serve-access-\(UUID().uuidString.prefix(8))")
            let status = try await process.waitForExit(timeout: .seconds(30))
            #expect(status == 64, "\(arguments): \(process.standardError)")
            #expect(process.standardError.contains(reason), "\(arguments): \(process.standardError)")
            #expect(!process.standardError.contains("hunter2") && !process.standardError.contains("$apr1$"))
        }
    }
}

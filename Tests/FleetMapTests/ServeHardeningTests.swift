import FleetMap
import FleetcastTestSupport
import Foundation
import InMemoryLogging
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `fleet-watch serve`, the built executable (once `FleetMapServer` in process, where a limit must
/// be set apart from its default), against what a security review measured: user names told
/// apart by the time of a 401, a bcrypt flood slowing everyone, sockets that never finish their
/// headers holding every place, and the headers of every response. Each client is its own
/// loopback address (`curl --interface 127.0.x.y`, or a socket bound to one), as separate
/// machines would be.
@Suite(.serialized, .tags(.loadsTheMachine), .oneMachineLoadAtATime) struct ServeHardeningTests {
    static let password = "correct horse battery staple"

    /// `fleet-watch serve` on a free port with `arguments` (no tiles unless they say), until it
    /// says it listens.
    static func startServe(_ broker: TestBroker, arguments: [String]) async throws -> (server: TestProcess, url: String) {
        let port = try FreePort.next()
        let server = try TestProcess(
            builtProduct("fleet-watch"),
            ["serve", "--broker", broker.url, "--listen", "127.0.0.1:\(port)", "--tiles", "none"] + arguments,
            directory: broker.directory, name: "serve-\(UUID().uuidString.prefix(8))")
        try await waitUntilServeListens(server)
        return (server, "http://127.0.0.1:\(port)")
    }

    /// A users file as an administrator makes it (Apache's htpasswd, bcrypt of `cost`), private.
    static func makeUsersFile(in directory: String, cost: Int) async throws -> String {
        let file = "\(directory)/users-\(cost)"
        try await TestBroker.runTool(
            "/usr/bin/htpasswd", ["-B", "-C", "\(cost)", "-b", "-c", file, "dispatcher", password], in: directory)
        chmod(file, 0o600)
        return file
    }

    /// What curl saw of one request: its exit status, the HTTP status, the whole time of the
    /// transfer in seconds (curl's `time_total`, the process's start-up excluded), and the
    /// headers then the body.
    struct Fetch {
        var exit: Int32
        var status: String
        var seconds: Double
        var output: String
    }

    /// Runs curl from the loopback address `source` (bounded to 20 s).
    static func curl(_ arguments: [String], from source: String, directory: String) async throws -> Fetch {
        let process = try TestProcess(
            "/usr/bin/curl", ["-sS", "--max-time", "20", "--interface", source, "-w", "\n%{http_code} %{time_total}"] + arguments,
            directory: directory, name: "curl-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(atPath: process.stdoutPath)
            try? FileManager.default.removeItem(atPath: process.stderrPath)
        }
        let exit = try await process.waitForExit(timeout: .seconds(30))
        var output = process.standardOutput
        let last = output.split(separator: "\n").last.map { $0.split(separator: " ") } ?? []
        if let newline = output.lastIndex(of: "\n") { output = String(output[..<newline]) }
        return Fetch(
            exit: exit, status: last.first.map(String.init) ?? "", seconds: last.count > 1 ? Double(last[1]) ?? .nan : .nan,
            output: output)
    }

    /// The HTTP statuses of a curl run over many URLs with `-w '%{http_code}\n'`, each body to
    /// /dev/null.
    static func statuses(_ process: TestProcess) -> [String] {
        process.standardOutput.split(separator: "\n").map(String.init)
    }

    /// curl's arguments for `count` requests for `url` over one connection, their bodies dropped,
    /// one status a line.
    static func repeated(_ url: String, _ count: Int) -> [String] {
        ["-w", "%{http_code}\n"] + (0..<count).flatMap { _ in ["-o", "/dev/null", url] }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    /// A raw TCP client bound to a loopback address of its own, for requests curl will not send
    /// (half a request, a raw NUL).
    final class RawClient {
        let fd: Int32

        init(from source: String, port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw TestSupportError.system("socket", errno) }
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0, FreePort.connectLoopback(fd, port: port) == 0 else {
                let failure = errno
                _ = Glibc.close(fd)
                throw TestSupportError.system("bind/connect from \(source)", failure)
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }

        deinit { _ = Glibc.close(fd) }

        /// Sends `bytes` (ignoring a connection the server closed).
        func send(_ bytes: [UInt8]) {
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        /// What has arrived (read now, without waiting), and whether the server closed the
        /// connection.
        func poll() -> (bytes: [UInt8], closed: Bool) {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    received += buffer[..<n]
                    continue
                }
                return (received, n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            }
        }
    }

    // MARK: - 1. User names do not leak through the time of a 401

    @Test func anUnknownUserIsRefusedAsSlowlyAsAKnownUserWithAWrongPassword() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            // Cost 10, as a careful administrator gives it (htpasswd -B -C 10): tens of
            // milliseconds a check, against a millisecond or two for a name looked up and missed.
            let users = try await Self.makeUsersFile(in: directory, cost: 10)
            let (server, url) = try await Self.startServe(broker, arguments: ["--users-file", users])
            defer { server.send(SIGKILL) }
            var unknown: [Double] = []
            var known: [Double] = []
            // Each attempt from an address of its own: the throttle is not what is measured.
            for i in 1...7 {
                let nobody = try await Self.curl(
                    ["-o", "/dev/null", "-u", "nobody\(i):\(Self.password)", "\(url)/"], from: "127.0.1.\(i)", directory: directory)
                let wrong = try await Self.curl(
                    ["-o", "/dev/null", "-u", "dispatcher:wrong\(i)", "\(url)/"], from: "127.0.2.\(i)", directory: directory)
                #expect(nobody.status == "401" && wrong.status == "401", "\(nobody) \(wrong)")
                unknown.append(nobody.seconds)
                known.append(wrong.seconds)
            }
            // Medians, and a generous factor: before, an unknown name was answered in an eighth of
            // the time (13 ms against 107 ms); now both run one bcrypt of the same cost.
            let ratio = Self.median(unknown) / Self.median(known)
            #expect(ratio > 0.5 && ratio < 2, "unknown user \(unknown) s, known user \(known) s")
            #expect(
                try await Self.curl(
                    ["-o", "/dev/null", "-u", "dispatcher:\(Self.password)", "\(url)/"], from: "127.0.2.100", directory: directory
                ).status == "200")
            #expect(server.isRunning)
        }
    }

    // MARK: - 2. Failed authentications are throttled per client

    /// In process, with the users file read as `serve` reads it, and failures earned back at one
    /// every 5 s instead of 2 a second: how many guesses pass must not depend on how busy the
    /// machine running the tests is.
    @Test func aClientThatFailsTooOftenGets429UncheckedWhileOthersAreServed() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let usersFile = try await Self.makeUsersFile(in: directory, cost: 5)
            let users = try MapAccess.users(htpasswd: try String(contentsOfFile: usersFile, encoding: .utf8), file: usersFile)
            let memory = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in memory }
            logger.logLevel = .info
            let (serving, port) = try await SlowBrowserTests.startServer(
                broker,
                options: FleetMapServer.Options(
                    port: 0, tiles: nil, authenticationFailuresPerSecond: 0.2, authenticationFailureBurst: 5,
                    access: MapAccess(users: users)),
                logger: logger, memory: memory)
            defer { serving.cancel() }
            let url = "http://127.0.0.1:\(port)"
            // Twelve wrong passwords in a row over one connection: the burst (5) is checked, the
            // rest refused with 429 at once.
            let guesser = try TestProcess(
                "/usr/bin/curl", ["-sS", "--interface", "127.0.3.1", "-u", "dispatcher:wrong"] + Self.repeated("\(url)/", 12),
                directory: directory, name: "guesser-\(UUID().uuidString.prefix(8))")
            _ = try await guesser.waitForExit(timeout: .seconds(30))
            let statuses = Self.statuses(guesser)
            #expect(statuses == Array(repeating: "401", count: 5) + Array(repeating: "429", count: 7), "\(statuses)")

            // Even the right password is refused now, unchecked, and told when to come back.
            let throttled = try await Self.curl(
                ["-D", "-", "-o", "/dev/null", "-u", "dispatcher:\(Self.password)", "\(url)/"], from: "127.0.3.1", directory: directory)
            #expect(throttled.status == "429", "\(throttled)")
            let retryAfter = throttled.output.split(separator: "\r\n").first { $0.lowercased().hasPrefix("retry-after: ") }
                .flatMap { Int($0.dropFirst("retry-after: ".count)) }
            #expect(retryAfter.map { (1...5).contains($0) } == true, "\(throttled.output)")
            #expect(throttled.output.contains("X-Content-Type-Options: nosniff"))

            // Another client is not touched: served with its password, checked without.
            #expect(
                try await Self.curl(
                    ["-o", "/dev/null", "-u", "dispatcher:\(Self.password)", "\(url)/"], from: "127.0.3.2", directory: directory
                ).status == "200")
            #expect(
                try await Self.curl(["-o", "/dev/null", "-u", "dispatcher:wrong", "\(url)/"], from: "127.0.3.2", directory: directory)
                    .status == "401")

            // After Retry-After the first client is served again.
            try await Task.sleep(for: .seconds(retryAfter ?? 5) + .milliseconds(200))
            #expect(
                try await Self.curl(
                    ["-o", "/dev/null", "-u", "dispatcher:\(Self.password)", "\(url)/"], from: "127.0.3.1", directory: directory
                ).status == "200")

            // Said once at info, naming the client; the flood of later refusals at debug.
            let said = memory.entries.filter { $0.message.description.hasPrefix("Refused to check the credentials") }
            #expect(said.count == 1 && said.first?.level == .info, "\(said)")
            #expect(said.first?.metadata["http.peer"]?.description.hasPrefix("127.0.3.1:") == true, "\(said)")
            #expect(!memory.entries.contains { "\($0.message) \($0.metadata)".contains(Self.password) })
            serving.cancel()
            _ = await serving.result
        }
    }

    @Test func sixteenParallelGuessersDoNotSlowALegitimateUser() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let users = try await Self.makeUsersFile(in: directory, cost: 10)
            let (server, url) = try await Self.startServe(broker, arguments: ["--users-file", users])
            defer { server.send(SIGKILL) }
            let legitimate = ["-o", "/dev/null", "-u", "dispatcher:\(Self.password)", "\(url)/api/vehicles"]
            var baseline: [Double] = []
            for _ in 0..<5 {
                let fetch = try await Self.curl(legitimate, from: "127.0.4.1", directory: directory)
                #expect(fetch.status == "200")
                baseline.append(fetch.seconds)
            }

            // 16 clients on one address, 10 wrong passwords a second each for 4 s: far more
            // bcrypt than the server's threads can run, had it checked them all.
            let started = ContinuousClock.now
            let attackers = try (0..<16).map { n in
                try TestProcess(
                    "/usr/bin/curl",
                    ["-sS", "--interface", "127.0.5.1", "--rate", "10/s", "-u", "dispatcher:wrong\(n)"] + Self.repeated("\(url)/", 40),
                    directory: directory, name: "attacker-\(n)-\(UUID().uuidString.prefix(8))")
            }
            defer { for attacker in attackers { attacker.send(SIGKILL) } }
            // Past the first parallel wave (checked before the first failure was counted): each
            // attacker's first request answered, and the server refusing to check any more.
            try await waitUntil("the first wave answered and the throttle on", timeout: .seconds(30), interval: .milliseconds(50)) {
                attackers.allSatisfy { !Self.statuses($0).isEmpty }
                    && server.standardError.contains("Refused to check the credentials of a client that failed too often")
            }
            var underAttack: [Double] = []
            for _ in 0..<5 {
                let fetch = try await Self.curl(legitimate, from: "127.0.4.1", directory: directory)
                #expect(fetch.status == "200")
                underAttack.append(fetch.seconds)
            }
            for attacker in attackers { _ = try await attacker.waitForExit(timeout: .seconds(60)) }
            let elapsed = ContinuousClock.now - started
            let statuses = attackers.flatMap { Self.statuses($0) }
            let checked = statuses.filter { $0 == "401" }.count
            #expect(statuses.count == 640 && statuses.allSatisfy { $0 == "401" || $0 == "429" }, "\(statuses.count)")
            // Checked: the burst, what was in flight when the tokens ran out (16, at most twice),
            // and 2 a second: dozens of the 640, not all of them.
            let seconds = Double(elapsed.components.seconds) + 1
            #expect(Double(checked) <= 5 + 32 + 2 * seconds, "\(checked) of 640 checked in \(elapsed)")
            // The legitimate user: medians, with a generous allowance (before: 0.1 s became 0.9 s).
            let before = Self.median(baseline)
            let during = Self.median(underAttack)
            #expect(during < max(3 * before, before + 0.5), "baseline \(baseline) s, under attack \(underAttack) s")
            #expect(server.isRunning)
        }
    }

    // MARK: - 3. Per-client connection cap and header deadline

    @Test func socketsThatNeverFinishTheirHeadersNoLongerHoldEveryPlace() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let (server, url) = try await Self.startServe(broker, arguments: ["--max-connections", "8"])
            defer { server.send(SIGKILL) }
            let port = try #require(Int(url.split(separator: ":").last ?? ""))
            // Eight sockets from one client, each with half a request: what held all eight places
            // for about a minute.
            let started = ContinuousClock.now
            let sockets = try (0..<8).map { _ in try RawClient(from: "127.0.6.1", port: port) }
            for socket in sockets { socket.send(Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)) }
            var open = sockets
            // A quarter of --max-connections (2) may stay; the other six are closed at once.
            try await waitUntil("six of the eight closed", timeout: .seconds(5), interval: .milliseconds(50)) {
                open = open.filter { !$0.poll().closed }
                return open.count <= 2
            }
            #expect(open.count == 2)
            #expect(ContinuousClock.now - started < .seconds(5))
            // Another client is served meanwhile.
            let other = try await Self.curl(
                ["-o", "/dev/null", "--max-time", "5", "\(url)/api/vehicles"], from: "127.0.6.2", directory: directory)
            #expect(other.status == "200", "\(other)")
            // The two left drip a byte a second (never idle), and are closed all the same once
            // 10 s pass without complete headers.
            try await waitUntil("the two closed by the header deadline", timeout: .seconds(25), interval: .seconds(1)) {
                for socket in open { socket.send(Array("x".utf8)) }
                open = open.filter { !$0.poll().closed }
                return open.isEmpty
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed > .seconds(8) && elapsed < .seconds(25), "closed after \(elapsed)")
            // The client's places are free again.
            #expect(
                try await Self.curl(["-o", "/dev/null", "\(url)/api/vehicles"], from: "127.0.6.1", directory: directory).status == "200")
            let log = server.standardError
            #expect(log.contains("Closed a connection from a client that has as many open as it may"), "\(log)")
            #expect(log.contains("http.connections_per_client=2"))
            #expect(log.contains("Closed a connection that sent no complete request headers in time"), "\(log)")
        }
    }

    // MARK: - 4. Headers of every response, and NUL in paths

    @Test func everyResponseSaysNosniffAndCarriesThePolicyAndANULInAPathIs400() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let users = try await Self.makeUsersFile(in: directory, cost: 5)
            let tiles = "https://{s}.tile.example.org/{z}/{x}/{y}.png"
            let (server, url) = try await Self.startServe(broker, arguments: ["--users-file", users, "--tiles", tiles])
            defer { server.send(SIGKILL) }
            let policy = MapSecurityHeaders.contentSecurityPolicy(tiles: tiles)
            #expect(policy.contains("img-src 'self' data: https://*.tile.example.org;") && !policy.contains("unsafe"))
            let user = ["-u", "dispatcher:\(Self.password)"]
            let cases: [(path: String, extra: [String], status: String)] = [
                ("/", user, "200"), ("/map.js", user, "200"), ("/map.css", user, "200"), ("/leaflet/leaflet.js", user, "200"),
                ("/leaflet/leaflet.css", user, "200"), ("/leaflet/images/layers.png", user, "200"), ("/api/vehicles", user, "200"),
                ("/events", user + ["-N", "--max-time", "2"], "200"), ("/no-such-page", user, "404"), ("/", [], "401"),
                ("/", user + ["-H", "Host: rebind.example"], "421"), ("/leaflet/leaflet.js%00.txt", user, "400"), ("/%00", user, "400"),
                ("/map.js%00", [], "400"),
            ]
            for (path, extra, status) in cases {
                let fetch = try await Self.curl(
                    extra + ["-D", "-", "-o", "/dev/null", "--path-as-is", "\(url)\(path)"], from: "127.0.7.1", directory: directory)
                #expect(fetch.status == status, "\(path): \(fetch)")
                #expect(fetch.output.contains("X-Content-Type-Options: nosniff\r\n"), "\(path): \(fetch.output)")
                #expect(fetch.output.contains("Content-Security-Policy: \(policy)\r\n"), "\(path): \(fetch.output)")
            }
            // A raw NUL never reaches the router: the parser's 400, with the headers too.
            let port = try #require(Int(url.split(separator: ":").last ?? ""))
            let raw = try RawClient(from: "127.0.7.2", port: port)
            raw.send(Array("GET /leaf".utf8) + [0] + Array("let/leaflet.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            var answer: [UInt8] = []
            try await waitUntil("the answer to a raw NUL", timeout: .seconds(5), interval: .milliseconds(20)) {
                let (bytes, closed) = raw.poll()
                answer += bytes
                return closed
            }
            let text = String(decoding: answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 400 "), "\(text)")
            #expect(
                text.contains("X-Content-Type-Options: nosniff\r\n") && text.contains("Content-Security-Policy: \(policy)\r\n"), "\(text)")
            #expect(server.isRunning)
        }
    }

    /// Debian's Chromium.
    static let chromium = "/usr/bin/chromium"

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: ServeHardeningTests.chromium),
            "Debian's chromium is not installed (deploy/test.sh installs it)"))
    func thePageRunsUnderItsPolicyWithTilesFromTheirServerAndNothingElse() async throws {
        try await withBroker { broker in
            // A tile server of another origin: a second serve, whose Leaflet image stands in for tiles.
            let (tileServer, tileURL) = try await Self.startServe(broker, arguments: [])
            defer { tileServer.send(SIGKILL) }
            let fleet = try await FleetMapServeTests.startFleet(
                broker, extraArguments: ["--tiles", "\(tileURL)/leaflet/images/layers.png?z={z}&x={x}&y={y}"])
            let (chrome, page) = try await FleetMapServeTests.openLivePage(fleet, broker: broker)
            do {
                // Every violation of the policy, from the page's first byte on.
                try page.call("Page.enable")
                try page.call(
                    "Page.addScriptToEvaluateOnNewDocument",
                    [
                        "source": """
                        window.violations = [];
                        document.addEventListener("securitypolicyviolation", e => window.violations.push(e.effectiveDirective + " " + e.blockedURI), true);
                        """
                    ])
                try page.call("Page.reload", ["ignoreCache": true])
                let state = """
                    JSON.stringify({
                      violations: window.violations || null,
                      connection: document.body ? document.body.dataset.connection : "",
                      markers: document.querySelectorAll(".leaflet-marker-icon").length,
                      tiles: performance.getEntriesByType("resource").filter(e => e.name.startsWith("\(tileURL)/")).length,
                      inline: document.body ? document.body.dataset.inline || "" : ""
                    })
                    """
                var seen: [String: Any] = [:]
                do {
                    try await waitUntil("the page live, with its markers and tiles", timeout: .seconds(60), interval: .milliseconds(200)) {
                        guard let json = try? page.evaluate(state),
                            let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                        else { return false }
                        seen = object
                        return object["violations"] is [String] && object["connection"] as? String == "open"
                            && object["markers"] as? Int == 2 && (object["tiles"] as? Int ?? 0) > 0
                    }
                } catch {
                    Issue.record("the page as last seen: \(seen)")
                    throw error
                }
                // Zoomed in and out while tiles load: Leaflet aborts the tiles it drops (pointing them
                // at its blank data: image), which the policy must allow too.
                for control in ["in", "in", "out", "in"] {
                    _ = try page.evaluate(#"(() => { document.querySelector(".leaflet-control-zoom-\#(control)").click(); return ""; })()"#)
                    try await Task.sleep(for: .milliseconds(150))
                }
                try await Task.sleep(for: .seconds(1))
                if let json = try? page.evaluate(state),
                    let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                {
                    seen = object
                }
                #expect(seen["violations"] as? [String] == [], "the page broke its own policy: \(seen)")

                // What the policy is for: an injected inline script does not run, and an image from
                // an origin it does not name is not loaded.
                _ = try page.evaluate(
                    """
                    (() => {
                      const script = document.createElement("script");
                      script.textContent = 'document.body.dataset.inline = "ran"';
                      document.body.appendChild(script);
                      const image = new Image();
                      image.src = "\(tileURL.replacingOccurrences(of: "127.0.0.1", with: "localhost"))/leaflet/images/layers.png?elsewhere";
                      document.body.appendChild(image);
                      return "";
                    })()
                    """)
                try await waitUntil("both refusals reported", timeout: .seconds(10), interval: .milliseconds(100)) {
                    guard let json = try? page.evaluate(state),
                        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                    else { return false }
                    seen = object
                    let violations = object["violations"] as? [String] ?? []
                    return violations.contains { $0.hasPrefix("script-src") } && violations.contains { $0.hasPrefix("img-src") }
                }
                #expect(seen["inline"] as? String == "", "\(seen)")
                #expect(fleet.server.isRunning && tileServer.isRunning)
            } catch {
                await chrome.stop(grace: .seconds(1))
                await fleet.stop()
                throw error
            }
            await chrome.stop(grace: .seconds(1))
            await fleet.stop()
        }
    }
}

import FleetCore
import FleetMap
import FleetcastTestSupport
import Testing

/// The decisions behind `serve`'s hardening, with plain values: no server, no clock, no sleep.
@Suite struct ServeHardeningStateTests {
    // htpasswd -nbB -C 6 dispatcher 'correct horse', as $2b$.
    static let dispatcherHash = "$2b$06$TraQpESNAJKMxG.5kW5UbOgaT/nxCU/YTdQR4YRM0UfLXDyyKQBqK"

    @Test func anUnknownUserCostsOneBcryptOfTheUsersCostAndNeverPasses() async throws {
        // The server's bcrypt, counted: each hash it is given, in turn.
        let verified = Locked<[String]>([])
        let users = MapUsers(hashes: ["dispatcher": Self.dispatcherHash]) { password, hash in
            verified.withLock { $0.append(hash) }
            return try await MapUsers.bcrypt(password, hash)
        }
        #expect(users.standInHash.hasPrefix("$2b$06$") && users.standInHash.utf8.count == 60, "\(users.standInHash)")

        #expect(try await users.verify(name: "dispatcher", password: "correct horse"))
        #expect(try await !users.verify(name: "dispatcher", password: "wrong"))
        #expect(try await !users.verify(name: "nobody", password: "wrong"))
        #expect(try await !users.verify(name: "nobody", password: "correct horse"))
        // Every attempt ran exactly one bcrypt verification; an unknown name's against the stand-in.
        #expect(verified.withLock { $0 } == [Self.dispatcherHash, Self.dispatcherHash, users.standInHash, users.standInHash])
        // Even a verifier that says yes to everything lets no unknown name in.
        let yes = MapUsers(hashes: ["dispatcher": Self.dispatcherHash]) { _, _ in true }
        #expect(try await !yes.verify(name: "nobody", password: "anything"))
    }

    @Test func theStandInHashTakesTheMostCommonCostAndIsFreshEachTime() {
        let hash = { (cost: String) in "$2b$\(cost)$" + String(repeating: "a", count: 53) }
        #expect(MapUsers.cost(of: hash("12")) == 12)
        #expect(MapUsers.cost(of: "$2b$x$") == nil && MapUsers.cost(of: "plain") == nil)
        #expect(MapUsers.commonCost(of: [hash("05"), hash("10"), hash("10")]) == 10)
        #expect(MapUsers.commonCost(of: [hash("05"), hash("12")]) == 12, "a tie takes the higher")
        #expect(MapUsers.commonCost(of: [String]()) == 10)
        #expect(MapUsers.standInHash(cost: 5).hasPrefix("$2b$05$"))
        #expect(MapUsers.standInHash(cost: 10) != MapUsers.standInHash(cost: 10))
        #expect(MapAccess(users: ["a": hash("05"), "b": hash("10")]).userHashCosts == [5, 10])
    }

    @Test func failuresAreThrottledPerClientAndEarnedBack() {
        let t0 = ContinuousClock.now
        var buckets = AuthenticationFailureBuckets(limits: .init(failuresPerSecond: 2, burst: 3, maximumClients: 100))
        // Three failures in a row pass (each checked), the fourth attempt is refused unchecked.
        for _ in 0..<3 {
            #expect(buckets.admit("192.0.2.1", now: t0) == .check)
            buckets.failed("192.0.2.1", now: t0)
        }
        #expect(buckets.admit("192.0.2.1", now: t0) == .refuse(retryAfterSeconds: 1, first: true))
        #expect(buckets.admit("192.0.2.1", now: t0 + .milliseconds(100)) == .refuse(retryAfterSeconds: 1, first: false))
        // Another client is not touched.
        #expect(buckets.admit("192.0.2.2", now: t0) == .check)
        // Half a second later (2 a second) one failure is earned back: one more check.
        #expect(buckets.admit("192.0.2.1", now: t0 + .milliseconds(500)) == .check)
        buckets.failed("192.0.2.1", now: t0 + .milliseconds(500))
        #expect(buckets.admit("192.0.2.1", now: t0 + .milliseconds(600)) == .refuse(retryAfterSeconds: 1, first: false))
        // Once full again the client is forgotten, and a later refusal is a new episode.
        #expect(buckets.admit("192.0.2.1", now: t0 + .seconds(3)) == .check)
        #expect(buckets.count == 0)
    }

    @Test func parallelFailuresPileUpDebtUpToAMinute() {
        let t0 = ContinuousClock.now
        var buckets = AuthenticationFailureBuckets(limits: .init(failuresPerSecond: 2, burst: 5, maximumClients: 100))
        // 16 guesses checked at once (admitted before any failed): all count.
        for _ in 0..<16 { #expect(buckets.admit("198.51.100.7", now: t0) == .check) }
        for _ in 0..<16 { buckets.failed("198.51.100.7", now: t0) }
        // 5 - 16 = -11 tokens: 6 s to earn one back.
        #expect(buckets.admit("198.51.100.7", now: t0) == .refuse(retryAfterSeconds: 6, first: true))
        // A thousand more never lock it out for more than a minute.
        for _ in 0..<1_000 { buckets.failed("198.51.100.7", now: t0) }
        #expect(buckets.admit("198.51.100.7", now: t0) == .refuse(retryAfterSeconds: 60, first: false))
        #expect(buckets.admit("198.51.100.7", now: t0 + .seconds(60)) == .check)
    }

    @Test func theTableIsCappedAndForgetsTheOldestFailureFirst() {
        let t0 = ContinuousClock.now
        var buckets = AuthenticationFailureBuckets(limits: .init(failuresPerSecond: 1, burst: 1, maximumClients: 4_096))
        buckets.failed("victim-of-eviction", now: t0)
        buckets.failed("recent", now: t0)
        for n in 0..<10_000 {
            buckets.failed("10.\(n / 65_536).\(n / 256 % 256).\(n % 256)", now: t0)
            if n % 1_000 == 0 { buckets.failed("recent", now: t0) }
        }
        #expect(buckets.count == 4_096)
        // The oldest was evicted (a fresh start), the recently failing one is still refused.
        #expect(buckets.admit("victim-of-eviction", now: t0) == .check)
        if case .refuse = buckets.admit("recent", now: t0) {} else { Issue.record("the recent client was forgotten") }
    }

    @Test func connectionsAreCountedPerClient() {
        var counts = PeerConnectionCounts(limit: 2)
        let opened = [counts.open("192.0.2.1"), counts.open("192.0.2.1"), counts.open("192.0.2.1"), counts.open("192.0.2.2")]
        #expect(opened == [true, true, false, true], "a third from the same client is one too many")
        #expect(counts.connections(of: "192.0.2.1") == 2)
        counts.close("192.0.2.1")
        let reopened = counts.open("192.0.2.1")
        #expect(reopened)
        for _ in 0..<3 { counts.close("192.0.2.1") }
        counts.close("192.0.2.2")
        #expect(counts.clients == 0, "only clients with open connections are remembered")
    }

    @Test func theHeaderDeadlineRunsWheneverARequestIsAwaited() {
        var deadline = HeaderDeadline()
        #expect(deadline.opened() == .start)
        #expect(deadline.receivedHeaders() == .stop)
        // A second request pipelined behind the first: nothing until both are answered.
        #expect(deadline.receivedHeaders() == .none)
        #expect(deadline.sentResponseEnd() == .none)
        #expect(deadline.sentResponseEnd() == .start, "keep-alive: the next request's headers are awaited")
        let fired = deadline.expired()
        #expect(fired, "fires while awaited: close")
        // An event stream: headers in, no end for hours, no deadline.
        var stream = HeaderDeadline()
        _ = stream.opened()
        _ = stream.receivedHeaders()
        let streamFired = stream.expired()
        #expect(!streamFired)
    }

    @Test func clientsAreIPv4AddressesOrIPv6Slash64s() {
        #expect(PeerAddress.key(ipAddress: "192.0.2.7") == "192.0.2.7")
        #expect(PeerAddress.key(ipAddress: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(PeerAddress.key(ipAddress: "2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64")
        #expect(PeerAddress.key(ipAddress: "::ffff:192.0.2.7") == "192.0.2.7")
        #expect(PeerAddress.key(ipAddress: "::1") == "0:0:0:0::/64")
        #expect(PeerAddress.key(nil) == "-")
    }

    @Test func theContentSecurityPolicyAllowsThePageAndItsTilesOnly() {
        let policy = MapSecurityHeaders.contentSecurityPolicy(tiles: FleetMapServer.openStreetMapTiles)
        #expect(
            policy
                == "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https://tile.openstreetmap.org; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        #expect(!policy.contains("unsafe"))
        #expect(MapSecurityHeaders.contentSecurityPolicy(tiles: nil).contains("img-src 'self';"))
        let cases: [(String, String)] = [
            ("https://{s}.tile.example.org/{z}/{x}/{y}.png", "https://*.tile.example.org"),
            ("http://127.0.0.1:8081/tiles/{z}/{x}/{y}.png?key=1", "http://127.0.0.1:8081"),
            ("HTTPS://Tiles.Example.COM/{z}/{x}/{y}.png", "https://tiles.example.com"),
            // What a source expression cannot say exactly: the scheme, never a directive.
            ("https://tile-{s}.example.org/{z}/{x}/{y}.png", "https:"),
            ("https://user:pass@tiles.example.org/{z}.png", "https:"),
            ("https://[2001:db8::1]/{z}.png", "https:"),
            ("https://tiles.example.org; script-src *;/{z}.png", "https:"),
            ("http://tiles.example.org:x/{z}.png", "http:"),
        ]
        for (template, source) in cases { #expect(MapSecurityHeaders.tileSource(template) == source, "\(template)") }
    }

    @Test func aNULInAPathIsFound() {
        for path in ["/%00", "/leaflet/leaflet.js%00.txt", "/a\u{0}b"] {
            #expect(RequestPathCheckMiddleware<MapRequestContext>.hasNUL(path), "\(path)")
        }
        for path in ["/", "/leaflet/leaflet.js", "/%2500", "/api/vehicles"] {
            #expect(!RequestPathCheckMiddleware<MapRequestContext>.hasNUL(path), "\(path)")
        }
    }
}

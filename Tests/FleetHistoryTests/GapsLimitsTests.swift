import FleetHistory
import FleetHistoryCore
import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch gaps` at the edges: numbers so far apart that the missing ones add up past
/// 2^64, and a database that never answers. Real PostgreSQL and the built `fleet-watch`.
@Suite struct GapsLimitsTests {
    /// 2^63 − 1: the largest `seq` a `bigint` column holds.
    static let highest = UInt64(Int64.max)

    @Test func countsOfMissingNumbersAreExactPast64Bits() {
        let gap = SequenceGap(vehicle: "van-x", run: 1, first: 2, last: Self.highest - 1)
        #expect(gap.count == UInt128(Self.highest) - 2)
        #expect(
            SequenceGap(vehicle: "v", run: 0, first: 0, last: .max).count == UInt128(1) << 64, "2^64 numbers: one more than UInt64 holds")
        #expect(SequenceGap(vehicle: "v", run: 0, first: 5, last: 4).count == 0, "an inverted range is empty, not a trap")
        let report = CompletenessReport(
            runs: (1...3).map { SequenceRunSummary(vehicle: "van-x", run: $0, first: 1, last: Self.highest, held: 2) },
            gaps: (1...3).map { SequenceGap(vehicle: "van-x", run: $0, first: 2, last: Self.highest - 1) })
        #expect(report.missing == 3 * (UInt128(Self.highest) - 2))
        #expect(report.missing > UInt128(UInt64.max))
        #expect(report.held == 6)
        #expect(report.runs.allSatisfy { $0.missing == UInt128(Self.highest) - 2 })
        #expect(SequenceRunSummary(vehicle: "v", run: 0, first: 0, last: .max, held: .max).missing == 1)
    }

    @Test(arguments: ["text", "json"])
    func aVehicleNumberedFrom1To2Pow63In3RunsIsReportedNotACrash(_ format: String) async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-gaps-overflow")
        defer { directory.remove() }
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database) { store, _ in
                try await store.migrate()
                let records = (1...3).flatMap { run in
                    [fix("van-x", seq: 1, run: UInt64(run), second: 0), fix("van-x", seq: Self.highest, run: UInt64(run), second: 1)]
                }
                #expect(try await store.insert(records) == 6)
            }
            let (status, output) = try await FleetRecorderDurabilityTests.gaps(
                postgres, database, directory: directory, extra: ["--format", format])
            #expect(status == 1, "incomplete, not a trap (132): \(output)")
            let total = "27670116110564327415"  // 3 × (2^63 − 3), more than 2^64
            #expect(output.contains(total), "\(output)")
            #expect(!output.contains("arithmetic overflow"), "\(output)")
            if format == "text" {
                for run in 1...3 {
                    #expect(output.contains("van-x run \(run) seq 2-9223372036854775806: 9223372036854775805 missing"), "\(output)")
                }
                #expect(output.contains("incomplete: \(total) messages missing in 3 gaps; 6 held of 1 vehicles in 3 numbering runs"))
            } else {
                let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("{") })
                #expect(line.contains("\"complete\":false,\"missing\":\(total),\"held\":6"), "\(line)")
                #expect(
                    line.contains(
                        "{\"vehicle\":\"van-x\",\"run\":3,\"first\":2,\"last\":9223372036854775806,\"missing\":9223372036854775805}"))
                // Exact in the text; a reader that keeps numbers in doubles gets it rounded.
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect((object["gaps"] as? [Any])?.count == 3)
            }
        }
    }

    /// `gaps` against `url`, with `extra` options: its status, output and time taken.
    static func gaps(_ url: String, extra: [String] = [], in directory: TemporaryDirectory) async throws -> (Int32, String, Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        let process = try TestProcess(
            builtProduct("fleet-watch"), ["gaps", "--postgres", url] + extra, directory: directory.path, name: "gaps-\(UUID().uuidString)")
        let status = try await process.waitForExit(timeout: .seconds(120))
        return (status, process.standardOutput + process.standardError, clock.now - start)
    }

    @Test func anUnreachableDatabaseIsGivenUpAfterTheConnectTimeout() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-gaps-timeout")
        defer { directory.remove() }
        let closedPort = try FreePort.next()
        let url = "postgres://nobody@127.0.0.1:\(closedPort)/fleet?sslmode=disable"

        let (status, output, took) = try await Self.gaps(url, extra: ["--connect-timeout", "2"], in: directory)
        #expect(status == 2, "\(output)")
        #expect(took < .seconds(8), "2 s and the exit, not the client's minute of retries: \(took)")
        #expect(output.contains("no answer from postgres://nobody@127.0.0.1:\(closedPort)/fleet"), "\(output)")
        #expect(output.contains("within 2 s (--connect-timeout)"), "\(output)")

        let (defaultStatus, defaultOutput, defaultTook) = try await Self.gaps(url, in: directory)
        #expect(defaultStatus == 2, "\(defaultOutput)")
        #expect(defaultTook >= .seconds(9) && defaultTook < .seconds(20), "10 s by default: \(defaultTook)")
        #expect(defaultOutput.contains("within 10 s (--connect-timeout)"), "\(defaultOutput)")

        let (badStatus, badOutput, _) = try await Self.gaps(url, extra: ["--connect-timeout", "0"], in: directory)
        #expect(badStatus == 64, "\(badOutput)")
        #expect(badOutput.contains("--connect-timeout: more than 0 and at most 3600 seconds"), "\(badOutput)")
    }

    @Test func theConnectTimeoutIsInTheHelp() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-gaps-help")
        defer { directory.remove() }
        let process = try TestProcess(builtProduct("fleet-watch"), ["gaps", "--help"], directory: directory.path, name: "help")
        #expect(try await process.waitForExit(timeout: .seconds(30)) == 0)
        let help = process.standardOutput.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        #expect(help.contains("--connect-timeout <seconds>"), "\(help)")
        #expect(help.contains("Seconds to wait for PostgreSQL to accept a connection and answer before giving up (exit 2)"), "\(help)")
        #expect(help.contains("(default: 10.0)"), "\(help)")
    }
}

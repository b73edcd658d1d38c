import ArgumentParser
import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetcastCore
import Foundation
import GNSS
import JSONEscaping
import Logging

/// `fleet-watch gaps --postgres …`: proves the recorded history complete, or names what it
/// lacks. Exits 0 when nothing is missing, 1 when something is (as `diff` does, so monitoring
/// can alert on it), 2 when it cannot tell.
struct GapsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gaps",
        abstract: "Lists the message numbers the recorded history lacks; exits 1 when any is missing.",
        discussion: """
            For each vehicle and numbering run, the seq ranges that `fleet-watch record` did \
            not store between the lowest and highest it did (fixes and headings share one \
            numbering). With --since/--until (ISO 8601 UTC; --since included, --until \
            excluded), each run is checked between its first and last fix of that time. Counts \
            are exact: a run whose numbers jump by 2^63 lacks that many, and the total may \
            exceed 2^64 (JSON readers that keep numbers in 64 bits or doubles lose precision \
            there). Where `record --retention` dropped old days, each run is checked from the \
            first day kept. Exit status: 0 complete, 1 something missing, 2 trouble (the database \
            cannot be read, or does not answer within --connect-timeout).
            """
    )

    /// How the report is written.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    @OptionGroup var database: PostgresOptions

    @OptionGroup var only: VehicleFilterOption

    @OptionGroup var range: TimeRangeOptions

    @Option(help: "text or json.")
    var format: Format = .text

    @Option(
        help: ArgumentHelp(
            "Seconds to wait for PostgreSQL to accept a connection and answer before giving up (exit 2); up to 3600.",
            valueName: "seconds"))
    var connectTimeout: Double = 10

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard connectTimeout.isFinite, connectTimeout > 0, connectTimeout <= 3600 else {
            throw ValidationError("--connect-timeout: more than 0 and at most 3600 seconds")
        }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let location = try database.location(logger: logger)
        let (from, to) = try range.bounds()
        let vehicle = try only.id
        let report: CompletenessReport
        do {
            report = try await PostgresOptions.withTrackStore(
                at: location, logger: logger, connectTimeout: .milliseconds(Int64(connectTimeout * 1000))
            ) { store in
                try await store.completeness(vehicle: vehicle, since: from, until: to)
            }
        } catch {
            logger.error(
                "cannot read the track history", metadata: ["postgres": "\(location)", "error": "\(describePostgresError(error))"])
            throw ExitCode(2)
        }
        let output = StandardOutput()
        switch format {
        case .text: output.write(Self.text(report))
        case .json: output.writeLine(Self.json(report))
        }
        if !report.isComplete { throw ExitCode(1) }
    }

    /// One line per gap (`van-7 run 1764072000123 seq 41-57: 17 missing`), then a summary line.
    static func text(_ report: CompletenessReport) -> String {
        var lines = report.gaps.map { gap in
            let range = gap.first == gap.last ? "\(gap.first)" : "\(gap.first)-\(gap.last)"
            return "\(gap.vehicle) run \(gap.run) seq \(range): \(gap.count) missing"
        }
        let vehicles = Set(report.runs.map(\.vehicle)).count
        let held = report.held
        if let kept = report.retainedFrom {
            lines.append("checked from \(kept) on: retention removed the history before it")
        }
        if report.setAside > 0 {
            lines.append("\(report.setAside) messages set aside by the recorder, not stored: see fleetcast_quarantine")
        }
        lines.append(
            report.isComplete
                ? "complete: \(held) messages of \(vehicles) vehicles in \(report.runs.count) numbering runs, none missing"
                : "incomplete: \(report.missing) messages missing in \(report.gaps.count) gaps; \(held) held of \(vehicles) vehicles in \(report.runs.count) numbering runs"
        )
        return lines.joined(separator: "\n") + "\n"
    }

    /// `{"complete":…,"missing":…,"held":…,"setAside":…,"runs":[{"vehicle","run","first","last","held","missing"}],"gaps":[{"vehicle","run","first","last","missing"}]}`.
    static func json(_ report: CompletenessReport) -> String {
        func object(_ fields: [(String, String)]) -> String {
            "{" + fields.map { "\(JSONString.quoted($0.0)):\($0.1)" }.joined(separator: ",") + "}"
        }
        let runs = report.runs.map { r in
            object([
                ("vehicle", JSONString.quoted(r.vehicle)), ("run", "\(r.run)"), ("first", "\(r.first)"), ("last", "\(r.last)"),
                ("held", "\(r.held)"), ("missing", "\(r.missing)"),
            ])
        }
        let gaps = report.gaps.map { g in
            object([
                ("vehicle", JSONString.quoted(g.vehicle)), ("run", "\(g.run)"), ("first", "\(g.first)"), ("last", "\(g.last)"),
                ("missing", "\(g.count)"),
            ])
        }
        var fields = [
            ("complete", report.isComplete ? "true" : "false"), ("missing", "\(report.missing)"),
            ("held", "\(report.held)"), ("setAside", "\(report.setAside)"),
            ("runs", "[" + runs.joined(separator: ",") + "]"), ("gaps", "[" + gaps.joined(separator: ",") + "]"),
        ]
        if let kept = report.retainedFrom { fields.append(("retainedFrom", JSONString.quoted("\(kept)"))) }
        return object(fields)
    }
}

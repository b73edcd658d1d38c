import ArgumentParser
import GNSS

/// `--since` and `--until` of the commands that read the recorded history: ISO 8601 UTC times,
/// the range including `--since` and excluding `--until`. A command that has defaults for an
/// end left out (`history`) says so in its discussion.
struct TimeRangeOptions: ParsableArguments {
    @Option(help: "From this time on, included (ISO 8601 UTC, such as 2026-11-24T08:00:00Z).")
    var since: String?

    @Option(help: "Until this time, excluded (ISO 8601 UTC).")
    var until: String?

    func validate() throws { _ = try bounds() }

    /// The ends given, `nil` for one left out; a usage error naming the option when a time
    /// cannot be read, or when both are given and `--since` is not before `--until`.
    func bounds() throws -> (since: UTCTimestamp?, until: UTCTimestamp?) {
        let from = try since.map { try Self.parse($0, option: "--since") }
        let to = try until.map { try Self.parse($0, option: "--until") }
        if let from, let to, from >= to { throw ValidationError("--since must be before --until") }
        return (from, to)
    }

    private static func parse(_ text: String, option: String) throws -> UTCTimestamp {
        guard let time = UTCTimestamp(iso8601: text) else {
            throw ValidationError("\(option) \(text.prefix(40)): expected an ISO 8601 UTC time such as 2026-11-24T08:00:00Z")
        }
        return time
    }
}

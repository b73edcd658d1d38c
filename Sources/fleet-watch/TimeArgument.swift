import ArgumentParser
import GNSS

/// A time given on the command line (`--since`, `--until`): ISO 8601 UTC, or a usage error
/// naming the option and the form expected.
func parseTimeArgument(_ text: String, option: String) throws -> UTCTimestamp {
    guard let time = UTCTimestamp(iso8601: text) else {
        throw ValidationError("\(option) \(text.prefix(40)): expected an ISO 8601 UTC time such as 2026-11-24T08:00:00Z")
    }
    return time
}

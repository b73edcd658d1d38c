/// Why the agent's configuration was refused: every problem found, each naming the key, where
/// the value came from (file, environment variable or flag) and the expected form.
///
/// Example: `qos.fix in /etc/fleetcast/agent.yaml: expected 0, 1 or 2, got "3"`.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One refused value, unknown key or unreadable file.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// The configuration key (`qos.fix`), or the file's path for a file-level problem.
        public let key: String
        /// Where the value came from.
        public let origin: ConfigurationOrigin
        /// The whole message.
        public let message: String

        /// `key in origin: expected …, got "…"` (the value is left out when secret).
        static func invalid(_ key: String, _ origin: ConfigurationOrigin, expected: String, got: String?) -> Problem {
            let shown = got.map { ", got \"\(Self.printable($0))\"" } ?? ""
            return Problem(key: key, origin: origin, message: "\(key) in \(origin): expected \(expected)\(shown)")
        }

        public var description: String { message }

        /// At most 80 characters, control characters escaped, for echoing input back.
        static func printable(_ text: String) -> String {
            var out = ""
            for scalar in text.unicodeScalars.prefix(80) {
                out += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.escaped(asASCII: true) : String(scalar)
            }
            return text.unicodeScalars.count > 80 ? out + "…" : out
        }
    }

    /// Every problem found, in key order of the sample configuration.
    public let problems: [Problem]

    /// An error listing `problems`.
    public init(problems: [Problem]) { self.problems = problems }

    /// One line per problem.
    public var description: String { problems.map(\.message).joined(separator: "\n") }
}

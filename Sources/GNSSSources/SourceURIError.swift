/// A source URI that cannot be used, naming the bad part and the form that was expected.
public struct SourceURIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URI as given.
    public let uri: String
    /// The part that is wrong (`scheme`, `baud`, `port`, `speed`…).
    public let part: String
    /// The offending text.
    public let value: String
    /// What would have been accepted.
    public let expected: String

    /// `bad baud "1234" in "serial:/dev/ttyS0?baud=1234": expected one of 4800, 9600, …`
    public var description: String {
        "bad \(part) \"\(value)\" in source URI \"\(uri)\": expected \(expected)"
    }
}

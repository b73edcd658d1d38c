/// A value that must never be shown: its description is `<redacted>`, in logs, errors and
/// configuration dumps alike. Read ``value`` only where the secret is used.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret text.
    public let value: String

    /// Wraps a secret text.
    public init(_ value: String) { self.value = value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

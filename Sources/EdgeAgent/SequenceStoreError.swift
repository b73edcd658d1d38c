/// Why the sequence store cannot be used.
public enum SequenceStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The state directory or file cannot be created, read or written: the message names the
    /// path and the system's reason.
    case io(String)
    /// The counter file does not hold a positive decimal number.
    case corrupt(path: String, content: String)

    public var description: String {
        switch self {
        case .io(let message):
            return "sequence store: \(message)"
        case .corrupt(let path, let content):
            return "sequence store: \(path) does not hold a sequence number (got \"\(content)\"); move it away to restart numbering"
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Failures of the test-support helpers, with enough detail to see what went wrong.
public enum TestSupportError: Error, CustomStringConvertible, Sendable {
    /// A system call failed with `errno`.
    case system(String, Int32)
    /// A bounded wait ran out.
    case timedOut(String, Duration)
    /// A helper process failed (exit status and its stderr).
    case processFailed(String, status: Int32, output: String)
    /// A text that should have been a JSON object.
    case notJSONObject(String)
    /// A file the test needed could not be written (its path).
    case cannotWrite(String)

    /// What failed, in words.
    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        case .timedOut(let what, let timeout): "timed out after \(timeout) waiting for \(what)"
        case .processFailed(let command, let status, let output): "\(command) exited with \(status): \(output)"
        case .cannotWrite(let path): "cannot write \(path)"
        case .notJSONObject(let text): "not a JSON object: \(text)"
        }
    }
}

import Foundation
import Synchronization

/// A child process a test starts and must stop: stdout and stderr go to files in a temp dir
/// (no pipe to fill up), exit is awaited without blocking a thread, and `deinit` kills a
/// process still running so that none is left behind.
public final class TestProcess: Sendable {
    /// The command line, for messages.
    public let commandLine: String
    /// Where stdout is written.
    public let stdoutPath: String
    /// Where stderr is written.
    public let stderrPath: String
    private let process: Mutex<Process>
    private let exit: ExitBox
    /// The process id.
    public let pid: Int32

    /// Starts `executable` with `arguments`; output files go in `directory`.
    public init(_ executable: String, _ arguments: [String], directory: String, name: String) throws {
        commandLine = ([executable] + arguments).joined(separator: " ")
        stdoutPath = "\(directory)/\(name).stdout"
        stderrPath = "\(directory)/\(name).stderr"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
        let exit = ExitBox()
        process.terminationHandler = { finished in
            let status = finished.terminationStatus
            let waiters = exit.state.withLock { state in
                state.status = status
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: status) }
        }
        try process.run()
        self.pid = process.processIdentifier
        self.exit = exit
        self.process = Mutex(process)
    }

    deinit {
        if isRunning { Foundation.kill(pid, SIGKILL) }
    }

    /// True until the process has exited.
    public var isRunning: Bool { exit.state.withLock { $0.status == nil } }

    /// Sends `signal` (SIGTERM, SIGKILL…) if the process is still running.
    public func send(_ signal: Int32) {
        if isRunning { Foundation.kill(pid, signal) }
    }

    /// Waits for the process to exit and returns its status.
    public func waitForExit() async -> Int32 {
        await withCheckedContinuation { waiter in
            let status: Int32? = exit.state.withLock { state in
                if state.status == nil { state.waiters.append(waiter) }
                return state.status
            }
            if let status { waiter.resume(returning: status) }
        }
    }

    /// Stops the process (SIGTERM, then SIGKILL after `grace`) and waits for it.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) async -> Int32 {
        send(SIGTERM)
        let killer = Task { [pid] in
            try await Task.sleep(for: grace)
            Foundation.kill(pid, SIGKILL)
        }
        let status = await waitForExit()
        killer.cancel()
        return status
    }

    /// Everything written to stdout so far.
    public var standardOutput: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    /// Everything written to stderr so far.
    public var standardError: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
}

/// The exit status of a ``TestProcess`` and the tasks waiting for it.
private final class ExitBox: Sendable {
    let state = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))
}

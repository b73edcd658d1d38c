import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process a test starts and must stop.
///
/// It is started with `posix_spawn` in its own process group, with an empty signal mask and
/// every signal at its default action — whatever the spawning thread blocks or the test runner
/// ignores (a Swift cooperative or Dispatch thread blocks almost every signal, and a child
/// would inherit that: `mosquitto_sub -W` would never time out, SIGTERM would do nothing).
/// stdin is `/dev/null`, stdout and stderr go to files in a temp dir (no pipe to fill up), and
/// no other descriptor of the test process leaks into it. A dedicated thread waits for its
/// exit, so awaiting it blocks no cooperative thread. `deinit` kills the process group if the
/// process is still running, so that none is left behind.
///
/// Why not swift-subprocess (1.0.2, which has process groups, resets signals in the child and
/// tears down with SIGTERM then SIGKILL): its `run(…) { execution in … }` is scoped — the
/// `Execution` must not escape the closure, `run` returns only once the child has exited, and
/// the teardown runs only when that closure throws or its task is cancelled. The tests need a
/// process as an object that outlives any one scope: a `TestBroker` keeps its mosquitto across
/// a test's steps, stops and relaunches it, and kills it from `deinit` when a failing test
/// unwinds; tests send SIGKILL or SIGSTOP at a moment of their choosing and read the stderr of
/// a child still running. Over swift-subprocess that would be a task per child holding the
/// closure open and smuggling the execution out of it — more code than this, and one more
/// package (with its traits and C shims) to build for every CI run.
public final class TestProcess: Sendable {
    /// How a process ended.
    public enum Termination: Equatable, Sendable, CustomStringConvertible {
        /// It called `exit` with this code (0…255).
        case exited(Int32)
        /// A signal ended it (SIGTERM, SIGKILL…).
        case signalled(Int32)
        /// Something else in the test process reaped it first; its status is unknown.
        case lost

        /// The status as a shell reports it: the exit code, 128 + the signal number for a
        /// signal, -1 when lost.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            case .lost: -1
            }
        }

        /// In words, for messages.
        public var description: String {
            switch self {
            case .exited(let code): "exited with status \(code)"
            case .signalled(let signal): "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
            case .lost: "exited with an unknown status"
            }
        }
    }

    /// The command line, for messages.
    public let commandLine: String
    /// Where stdout is written.
    public let stdoutPath: String
    /// Where stderr is written.
    public let stderrPath: String
    /// The process id; also the id of its process group.
    public let pid: Int32
    private let exit: Locked<ExitState>

    /// Starts `executable` (an absolute path) with `arguments`; its stdout and stderr go to
    /// `directory/name.stdout` and `directory/name.stderr`; `environment` is added to (or
    /// overrides) the test's own. Throws when it cannot be started.
    public init(
        _ executable: String, _ arguments: [String], directory: String, name: String, environment: [String: String] = [:]
    ) throws {
        commandLine = ([executable] + arguments).joined(separator: " ")
        stdoutPath = "\(directory)/\(name).stdout"
        stderrPath = "\(directory)/\(name).stderr"

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Close every other descriptor (sockets of the test's clients, other children's
        // output files) in the child. glibc ≥ 2.34 has the call, but its header hides it from
        // Swift's Glibc module, hence the lookup.
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        var variables = ProcessInfo.processInfo.environment
        // A test runner started by systemd must not hand its own notification socket to the
        // agents it starts: they would tell systemd about themselves.
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { variables[key] = nil }
        variables.merge(environment) { _, new in new }
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw TestSupportError.system("posix_spawn \(executable)", rc) }
        self.pid = pid

        let exit = Locked(ExitState())
        self.exit = exit
        let spawned = pid
        Thread.detachNewThread { Self.reap(spawned, into: exit) }
    }

    deinit {
        send(SIGKILL, toGroup: true)
    }

    /// True until the process has exited.
    public var isRunning: Bool { exit.withLock { $0.termination == nil } }

    /// How the process ended; `nil` while it runs.
    public var termination: Termination? { exit.withLock { $0.termination } }

    /// The CPU time the process used, in user space and in the kernel (its own and that of
    /// the children it waited for, as `wait4(2)` reports it); `nil` while it runs, or when
    /// something else reaped it.
    public var cpuTime: (user: Duration, system: Duration)? { exit.withLock { $0.cpuTime } }

    /// Sends `signal` (SIGTERM, SIGKILL…) to the process — or to its whole process group
    /// (what it started too) with `toGroup` — if it is still running.
    public func send(_ signal: Int32, toGroup: Bool = false) {
        // The signal is sent under the lock on purpose: the reaper takes the same lock to
        // reap, so while `termination` is nil here the pid cannot have been reused.
        exit.withLock { state in
            if state.termination == nil { _ = Glibc.kill(toGroup ? -pid : pid, signal) }
        }
    }

    /// Waits for the process to exit and returns its ``Termination/status`` (the exit code,
    /// or 128 + the signal number). Honours cancellation: a cancelled wait returns -1 at once
    /// and leaves the process running — so `withTimeout { await p.waitForExit() }` is bounded.
    public func waitForExit() async -> Int32 {
        await awaitTermination()?.status ?? -1
    }

    /// Waits at most `timeout` for the process to exit and returns its
    /// ``Termination/status``; throws ``TestSupportError/timedOut(_:_:)`` (leaving the process
    /// running) when it has not exited by then.
    public func waitForExit(timeout: Duration) async throws -> Int32 {
        try await withTimeout(timeout, "\(commandLine) to exit") { [self] in
            guard let termination = await awaitTermination() else { throw CancellationError() }
            return termination.status
        }
    }

    /// Waits at most `timeout` for the process to exit and returns its ``Termination/status``;
    /// when it has not exited by then, ``stop(grace:)``s it and throws
    /// ``TestSupportError/timedOut(_:_:)``: for a tool that must finish by itself.
    public func waitForExitOrStop(timeout: Duration, grace: Duration = .seconds(2)) async throws -> Int32 {
        do {
            return try await waitForExit(timeout: timeout)
        } catch {
            await stop(grace: grace)
            throw error
        }
    }

    /// Stops the process and its process group: SIGTERM, then SIGKILL if it has not exited
    /// after `grace`; waits for it and returns its ``Termination/status``. Whatever is left
    /// of its group afterwards (a daemon it started) is killed.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) async -> Int32 {
        send(SIGTERM, toGroup: true)
        let status: Int32
        do {
            status = try await waitForExit(timeout: grace)
        } catch {
            send(SIGKILL, toGroup: true)
            // SIGKILL cannot be caught or blocked: this wait is short, and it must not be cut
            // short by the caller's cancellation, or the process would not be reaped yet.
            status = await Task { await self.waitForExit() }.value
        }
        // Members of the group that outlived the leader; the group id stays reserved while
        // they exist, and without members this finds nothing (ESRCH).
        _ = Glibc.kill(-pid, SIGKILL)
        return status
    }

    /// Everything written to stdout so far.
    public var standardOutput: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    /// Everything written to stderr so far.
    public var standardError: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Waits for the termination; `nil` if the task was cancelled first.
    private func awaitTermination() async -> Termination? {
        let id = exit.withLock { $0.makeWaiterID() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Termination?, Never>) in
                let action = exit.withLock { $0.addWaiter(id, continuation, cancelled: Task.isCancelled) }
                if case .resume(let termination) = action { continuation.resume(returning: termination) }
            }
        } onCancel: {
            exit.withLock { $0.removeWaiter(id) }?.resume(returning: nil)
        }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, if this libc has it: looked up at run
    /// time because glibc only has it since 2.34 (and Swift's Glibc module does not declare it),
    /// so the test support still builds and runs, without closing other descriptors, on an
    /// older one.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32)? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
    }()

    /// Runs on the process's own thread: blocks until `pid` exits, then reaps it and
    /// resumes every waiter.
    private static func reap(_ pid: pid_t, into exit: Locked<ExitState>) {
        // Wait without reaping, so that the pid stays ours until the lock is held below.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        let (termination, waiters) = exit.withLock { state in
            var status: Int32 = 0
            var usage = rusage()
            let termination: Termination
            var cpuTime: (user: Duration, system: Duration)?
            if wait4(pid, &status, 0, &usage) == pid {
                cpuTime = (usage.ru_utime.duration, usage.ru_stime.duration)
                // The <sys/wait.h> macros: low 7 bits 0 = exited (code in bits 8…15), else
                // the terminating signal.
                termination = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
            } else {
                termination = .lost
            }
            return (termination, state.finish(termination, cpuTime: cpuTime))
        }
        for waiter in waiters { waiter.resume(returning: termination) }
    }
}

/// The exit of a ``TestProcess`` and the tasks waiting for it. Each event returns what the
/// caller must do; continuations are resumed after the lock is released.
private struct ExitState {
    enum AddAction {
        case wait
        case resume(TestProcess.Termination?)
    }

    private(set) var termination: TestProcess.Termination?
    /// User and system CPU time, from the reaping `wait4`.
    private(set) var cpuTime: (user: Duration, system: Duration)?
    private var waiters: [Int: CheckedContinuation<TestProcess.Termination?, Never>] = [:]
    private var nextWaiterID = 0

    mutating func makeWaiterID() -> Int {
        nextWaiterID += 1
        return nextWaiterID
    }

    /// Registers a waiter, unless the process has already exited or the task is cancelled.
    mutating func addWaiter(
        _ id: Int, _ continuation: CheckedContinuation<TestProcess.Termination?, Never>, cancelled: Bool
    ) -> AddAction {
        if let termination { return .resume(termination) }
        if cancelled { return .resume(nil) }
        waiters[id] = continuation
        return .wait
    }

    /// The waiter to resume with `nil` on cancellation, if it is still waiting.
    mutating func removeWaiter(_ id: Int) -> CheckedContinuation<TestProcess.Termination?, Never>? {
        waiters.removeValue(forKey: id)
    }

    /// Records the termination and the CPU time used; returns the waiters to resume.
    mutating func finish(
        _ termination: TestProcess.Termination, cpuTime: (user: Duration, system: Duration)?
    ) -> [CheckedContinuation<TestProcess.Termination?, Never>] {
        self.termination = termination
        self.cpuTime = cpuTime
        defer { waiters.removeAll() }
        return Array(waiters.values)
    }
}

extension timeval {
    /// This interval as a `Duration`.
    fileprivate var duration: Duration { .seconds(Int64(tv_sec)) + .microseconds(Int64(tv_usec)) }
}

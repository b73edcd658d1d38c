#if canImport(Glibc)
import Glibc
#endif
import Testing

/// A real helper process (socat, gpsfake) started in its own process group, so that
/// stopping it also stops what it started (gpsfake's gpsd).
final class ChildProcess {
    let pid: pid_t
    private var reaped = false

    /// Starts `executable` with `arguments`; stdout and stderr go to /dev/null.
    init(_ executable: String, _ arguments: [String]) throws {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // Own process group; default signal handling and an empty mask, whatever the test
        // runner set for itself (ignored dispositions and masks survive exec).
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attr, 0)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attr, argv, environ)
        try #require(rc == 0, "cannot start \(executable): \(String(cString: strerror(rc)))")
        self.pid = pid
    }

    /// Whether the process is still running.
    var isRunning: Bool {
        guard !reaped else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            reaped = true
            return false
        }
        return true
    }

    /// Stops the whole process group (SIGTERM, then SIGKILL after `grace`) and reaps it;
    /// every wait is bounded, and a process that outlives SIGKILL is reported as an issue.
    func stop(grace: Duration = .seconds(3)) async {
        guard !reaped else {
            // Whatever the leader left in its group (a gpsd that outlived gpsfake).
            kill(-pid, SIGKILL)
            return
        }
        kill(-pid, SIGTERM)
        // There is no event for a child's exit short of SIGCHLD, which belongs to the test
        // runner: poll with WNOHANG (bounded).
        if !(await reap(within: grace)) {
            kill(-pid, SIGKILL)
            if !(await reap(within: .seconds(5))) {
                Issue.record("process \(pid) did not exit after SIGKILL")
                return
            }
        }
        // Whatever is left of the group (a gpsd that outlived gpsfake) goes now.
        kill(-pid, SIGKILL)
    }

    /// Polls for the leader's exit for up to `limit`; `true` once reaped.
    private func reap(within limit: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        var status: Int32 = 0
        while !reaped {
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
            } else if clock.now >= deadline {
                return false
            } else {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        return true
    }

    deinit {
        // A test that failed before `stop()`: kill the group and reap (a SIGKILLed process
        // exits at once; the loop is bounded all the same, never waiting forever).
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        for _ in 0..<500 where !reaped {
            if waitpid(pid, &status, WNOHANG) == pid { reaped = true } else { usleep(10_000) }
        }
    }
}

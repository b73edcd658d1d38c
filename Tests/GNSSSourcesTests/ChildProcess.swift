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

    /// Stops the whole process group (SIGTERM, then SIGKILL after `grace`) and reaps it.
    func stop(grace: Duration = .seconds(3)) async {
        guard !reaped else {
            kill(-pid, SIGKILL)
            return
        }
        kill(-pid, SIGTERM)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: grace)
        var status: Int32 = 0
        while clock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
                break
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Whatever is left of the group (a gpsd that outlived gpsfake) goes now.
        kill(-pid, SIGKILL)
        if !reaped {
            waitpid(pid, &status, 0)
            reaped = true
        }
    }

    deinit {
        if !reaped {
            kill(-pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}

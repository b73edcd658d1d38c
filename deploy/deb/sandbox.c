// sandbox: runs a command under the seccomp rules that fleetcast-agent.service asks systemd for,
// so that deploy/package-test.sh can show the installed agent working under them on a machine
// where systemd does not run (a container, CI).
//
//   sandbox SYSCALLS -- COMMAND [ARG…]
//
// SYSCALLS: a file naming the allowed system calls, one a line (package-test.sh expands the
// unit's SystemCallFilter= lines with `systemd-analyze syscall-filter`). As the unit says
// (SystemCallErrorNumber=EPERM), any other call fails with EPERM; SANDBOX_DENY=kill kills the
// process instead, to find out which call it was. On top of the list, as systemd does:
// - MemoryDenyWriteExecute=yes: no mmap() both writable and executable, no mprotect() or
//   pkey_mprotect() adding PROT_EXEC, no shmat() with SHM_EXEC;
// - RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6: socket() of any other family fails;
// - SystemCallArchitectures=native: calls of another architecture's ABI kill the process;
// - NoNewPrivileges=yes (which seccomp needs anyway).
// Not covered, because only systemd can set them up: the device cgroup (DevicePolicy=,
// DeviceAllow=), the mount namespace (ProtectSystem=, PrivateTmp=…), RestrictNamespaces=,
// LockPersonality=, RestrictRealtime= and the capability bounding set (setpriv drops that one).
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

static void fail(const char *what, int error) {
    fprintf(stderr, "sandbox: %s: %s\n", what, strerror(error < 0 ? -error : error));
    exit(125);
}

static void add(scmp_filter_ctx ctx, int syscall, unsigned count, const struct scmp_arg_cmp *args,
                const char *name) {
    int r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, syscall, count, args);
    if (r < 0) fail(name, r);
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: sandbox SYSCALLS -- COMMAND [ARG…]\n");
        return 125;
    }
    const char *deny = getenv("SANDBOX_DENY");
    uint32_t denied = deny && strcmp(deny, "kill") == 0 ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM);
    scmp_filter_ctx ctx = seccomp_init(denied);
    if (!ctx) fail("seccomp_init", ENOMEM);

    FILE *list = fopen(argv[1], "r");
    if (!list) fail(argv[1], errno);
    char line[128];
    int allowed = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (line[0] == '\0') continue;
        int nr = seccomp_syscall_resolve_name(line);
        if (nr == __NR_SCMP_ERROR) continue;  // not a call of this architecture (systemd skips it too)
        if (nr < 0) continue;                 // a pseudo-call libseccomp cannot place on this arch
        if (strcmp(line, "mmap") == 0 || strcmp(line, "mmap2") == 0) {
            // allowed unless PROT_WRITE and PROT_EXEC both (arg 2 is prot)
            const scmp_datum_t wx = PROT_WRITE | PROT_EXEC;
            struct scmp_arg_cmp none = SCMP_A2(SCMP_CMP_MASKED_EQ, wx, 0);
            struct scmp_arg_cmp w = SCMP_A2(SCMP_CMP_MASKED_EQ, wx, PROT_WRITE);
            struct scmp_arg_cmp x = SCMP_A2(SCMP_CMP_MASKED_EQ, wx, PROT_EXEC);
            add(ctx, nr, 1, &none, line);
            add(ctx, nr, 1, &w, line);
            add(ctx, nr, 1, &x, line);
        } else if (strcmp(line, "mprotect") == 0) {
            struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
            add(ctx, nr, 1, &noexec, line);
        } else if (strcmp(line, "pkey_mprotect") == 0) {
            struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
            add(ctx, nr, 1, &noexec, line);
        } else if (strcmp(line, "shmat") == 0) {
            struct scmp_arg_cmp noexec = SCMP_A2(SCMP_CMP_MASKED_EQ, SHM_EXEC, 0);
            add(ctx, nr, 1, &noexec, line);
        } else if (strcmp(line, "socket") == 0) {
            const int families[] = {AF_UNIX, AF_INET, AF_INET6};
            for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
                struct scmp_arg_cmp family = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]);
                add(ctx, nr, 1, &family, line);
            }
        } else {
            add(ctx, nr, 0, NULL, line);
        }
        allowed++;
    }
    fclose(list);
    if (allowed < 50) fail("too few system calls in the list", EINVAL);
    // systemd allows these whatever the list says: the process must be able to start and end.
    const char *always[] = {"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn"};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) {
        int nr = seccomp_syscall_resolve_name(always[i]);
        if (nr >= 0) add(ctx, nr, 0, NULL, always[i]);
    }

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("PR_SET_NO_NEW_PRIVS", errno);
    int r = seccomp_load(ctx);
    if (r < 0) fail("seccomp_load", r);
    seccomp_release(ctx);
    execv(argv[3], argv + 3);
    fail(argv[3], errno);
}

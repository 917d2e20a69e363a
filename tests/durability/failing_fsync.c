/* An LD_PRELOAD shim that makes fsync(2) and fdatasync(2) of commitlog files fail with EIO while
 * the file named by GREGOR_FAIL_FSYNC_FLAG exists: a disk that starts failing under a running
 * broker, seen through the same libc calls Python's os.fdatasync makes. Built by
 * tests/durability/test_failing_fsync.py with the system's cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int should_fail(int fd) {
    const char *flag = getenv("GREGOR_FAIL_FSYNC_FLAG");
    if (flag == NULL || access(flag, F_OK) != 0) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = '\0';
    return strstr(target, "/commitlog/") != NULL;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (should_fail(fd)) { errno = EIO; return -1; }
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (should_fail(fd)) { errno = EIO; return -1; }
    return real(fd);
}

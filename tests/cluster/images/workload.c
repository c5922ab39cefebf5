/*
 * The cluster tests' workload: writes what the container was given, then
 * sleeps until SIGTERM (the kubelet stops it) or SIGINT.
 *
 *   device <path> <char|block> <major>:<minor>   every device node under /dev
 *                                                 (and one folder deep)
 *   env <NAME>=<value>                            every environment variable
 *   mount <path>                                  every argument that exists
 *   ready
 *
 * The kubelet keeps this output as the container's log, which the tests
 * read. Built static (musl) by build.sh.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

extern char **environ;

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void devices(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) {
            continue;
        }
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
            printf("device %s %s %u:%u\n", path, S_ISCHR(st.st_mode) ? "char" : "block",
                   major(st.st_rdev), minor(st.st_rdev));
        } else if (S_ISDIR(st.st_mode) && depth > 0 && strcmp(entry->d_name, "pts") != 0 &&
                   strcmp(entry->d_name, "shm") != 0 && strcmp(entry->d_name, "mqueue") != 0) {
            devices(path, depth - 1);
        }
    }
    closedir(d);
}

int main(int argc, char **argv) {
    struct sigaction action = {0};
    action.sa_handler = stop;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    devices("/dev", 1);
    for (char **e = environ; *e != NULL; e++) {
        printf("env %s\n", *e);
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0) {
            printf("mount %s\n", argv[i]);
        }
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        pause();
    }
}

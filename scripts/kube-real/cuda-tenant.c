/*
 * A stand-in for a CUDA process in the node tier's tenant pods (images.sh builds it into
 * localhost/tessera-test/tenant:1). At start it does what the CUDA driver does at cuInit when
 * CUDA_INJECTION64_PATH is set: dlopen the library and call its InitializeInjection. A library
 * that cannot load is reported on stderr and the process carries on, as the driver does.
 * Then it waits for SIGTERM (it is PID 1 of its container, where the default action is none).
 *
 *   cuda-tenant            the tenant; with TENANT_WORKERS=N it also starts N workers
 *   cuda-tenant --worker   a worker: started as a spawned data loader is (fork, then exec of
 *                          the same program with the parent's environment), so its own
 *                          "cuInit" loads the probe again and it connects under its own PID
 *
 * The probe's kernels come from the stand-in CUPTI in the image (crates/fake-cupti), which
 * reads FAKE_CUPTI_KERNELS_PER_FLUSH from the environment; TENANT_WORKER_KERNELS sets a
 * worker's own rate.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void cu_init(const char *who) {
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "cuda-tenant %s: no injection library\n", who);
        return;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "cuda-tenant %s: injection library not loaded: %s\n", who, dlerror());
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
    if (init == NULL) {
        fprintf(stderr, "cuda-tenant %s: no InitializeInjection in %s\n", who, path);
        return;
    }
    fprintf(stderr, "cuda-tenant %s: pid %d, InitializeInjection returned %d\n", who, (int)getpid(),
            init());
}

int main(int argc, char **argv) {
    int worker = argc > 1 && strcmp(argv[1], "--worker") == 0;
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    if (worker) {
        const char *k = getenv("TENANT_WORKER_KERNELS");
        if (k != NULL) {
            setenv("FAKE_CUPTI_KERNELS_PER_FLUSH", k, 1);
        }
    }
    cu_init(worker ? "worker" : "main");
    if (!worker) {
        const char *n = getenv("TENANT_WORKERS");
        for (int i = 0; n != NULL && i < atoi(n); i++) {
            pid_t pid = fork();
            if (pid == 0) {
                execl("/proc/self/exe", argv[0], "--worker", (char *)NULL);
                fprintf(stderr, "cuda-tenant: exec of a worker failed\n");
                _exit(1);
            }
            if (pid < 0) {
                fprintf(stderr, "cuda-tenant: fork failed\n");
            }
        }
    }
    for (;;) {
        pause();
    }
}

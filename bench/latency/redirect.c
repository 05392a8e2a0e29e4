/* LD_PRELOAD shim for the latency benchmark: a connect() to 127.0.0.1:<from> goes to
 * 127.0.0.1:<to> instead, for every pair in CAIRN_REDIRECT ("6800=31950,6801=31951").
 *
 * It puts the delay proxy (bench/latency/proxy.py) between Ceph clients and an OSD without
 * the OSD knowing: the client still believes it talks to the OSD's own address, which is
 * what the messenger's handshake checks. The variable is read at each connect(), so one
 * process can open connections with and without the proxy. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static connect_fn real;
    if (real == NULL)
        real = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *map = getenv("CAIRN_REDIRECT");
    if (map == NULL || addr == NULL || addr->sa_family != AF_INET ||
        len < (socklen_t)sizeof(struct sockaddr_in))
        return real(fd, addr, len);
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    if (in->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        return real(fd, addr, len);
    unsigned long port = ntohs(in->sin_port);
    const char *p = map;
    while (*p != '\0') {
        char *end;
        unsigned long from = strtoul(p, &end, 10);
        if (*end != '=')
            break;
        unsigned long to = strtoul(end + 1, &end, 10);
        if (from == port) {
            struct sockaddr_in moved = *in;
            moved.sin_port = htons((unsigned short)to);
            return real(fd, (const struct sockaddr *)&moved, sizeof moved);
        }
        if (*end != ',')
            break;
        p = end + 1;
    }
    return real(fd, addr, len);
}

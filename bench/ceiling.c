/* The loopback ceiling for bench/cores.py: a single-threaded epoll server that answers every
 * request frame with one pre-encoded answer, the request's opaque written into it.  No route
 * table, no decoding beyond finding the opaque: the fastest any server can answer this load on
 * this machine, which is what rocketpy's figures are divided by.  Not a NameServer.
 *
 *   gcc -O2 -o ceiling bench/ceiling.c
 *   ./ceiling ANSWER_FILE OPAQUE_AT OPAQUE_LEN      (prints "port N", then serves until killed)
 *
 * ANSWER_FILE is a whole answer frame (JSON header) whose opaque digits are the OPAQUE_LEN bytes
 * at OPAQUE_AT; each answer is that frame with the request's opaque digits there instead and its
 * two length fields rewritten.  Requests must have JSON headers that write "opaque":<digits>. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_SIZE 65536
#define MAX_FRAME (16 << 20)

typedef struct {
    int fd;
    uint8_t *in;            /* bytes read and not yet answered (a partial frame) */
    size_t in_len, in_cap;
    uint8_t *out;           /* answers not yet written */
    size_t out_len, out_off, out_cap;
    int want_out;           /* EPOLLOUT asked for: the socket's buffer was full */
} conn_t;

static const uint8_t *pre, *post, *body;    /* the answer around its opaque digits */
static size_t pre_len, post_len, body_len;

static void *grow(void *p, size_t *cap, size_t need) {
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c);
    if (!q) {
        perror("realloc");
        exit(1);
    }
    *cap = c;
    return q;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

static void wr32(uint8_t *p, uint32_t v) {
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

/* one answer for the request frame f (n bytes) appended to c->out; 0, or -1 (not a request this
 * server can answer: the connection is closed) */
static int answer(conn_t *c, const uint8_t *f, size_t n) {
    static const char key[] = "\"opaque\":";
    if (n < 8)
        return -1;
    size_t hlen = rd32(f + 4) & 0xFFFFFF;
    if (hlen > n - 8)
        return -1;
    const uint8_t *h = f + 8, *end = h + hlen;
    const uint8_t *at = memmem(h, hlen, key, sizeof key - 1);
    if (!at)
        return -1;
    const uint8_t *d = at + sizeof key - 1, *e = d;
    while (e < end && (*e == '-' || (*e >= '0' && *e <= '9')))
        e++;
    size_t digits = (size_t)(e - d), header = pre_len + digits + post_len;
    size_t total = 8 + header + body_len;
    c->out = grow(c->out, &c->out_cap, c->out_len + total);
    uint8_t *o = c->out + c->out_len;
    wr32(o, (uint32_t)(total - 4));
    wr32(o + 4, (uint32_t)header);
    memcpy(o + 8, pre, pre_len);
    memcpy(o + 8 + pre_len, d, digits);
    memcpy(o + 8 + pre_len + digits, post, post_len);
    memcpy(o + 8 + header, body, body_len);
    c->out_len += total;
    return 0;
}

/* write what is pending; 0, or -1 (gone) */
static int flush(int ep, conn_t *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN) {
                if (!c->want_out) {
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                    c->want_out = 1;
                }
                return 0;
            }
            return -1;
        }
        c->out_off += (size_t)w;
    }
    if (c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = 0;
    }
    c->out_len = c->out_off = 0;
    return 0;
}

/* one read; 0, or -1 (closed) */
static int readable(int ep, conn_t *c) {
    c->in = grow(c->in, &c->in_cap, c->in_len + READ_SIZE);
    ssize_t r = recv(c->fd, c->in + c->in_len, READ_SIZE, 0);
    if (r <= 0)
        return r < 0 && errno == EAGAIN ? 0 : -1;
    c->in_len += (size_t)r;
    size_t pos = 0;
    while (c->in_len - pos >= 4) {
        size_t total = (size_t)rd32(c->in + pos) + 4;
        if (total > MAX_FRAME || total < 8)
            return -1;
        if (c->in_len - pos < total)
            break;
        if (answer(c, c->in + pos, total) < 0)
            return -1;
        pos += total;
    }
    memmove(c->in, c->in + pos, c->in_len - pos);
    c->in_len -= pos;
    return flush(ep, c);
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)size);
    if (!p || fread(p, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        exit(2);
    }
    fclose(f);
    *n = (size_t)size;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s ANSWER_FILE OPAQUE_AT OPAQUE_LEN\n", argv[0]);
        return 2;
    }
    size_t n, at = (size_t)atol(argv[2]), len = (size_t)atol(argv[3]);
    const uint8_t *frame = read_file(argv[1], &n);
    size_t hlen = rd32(frame + 4) & 0xFFFFFF;
    if (n < 8 || at < 8 || at + len > 8 + hlen || 8 + hlen > n) {
        fprintf(stderr, "ceiling: the opaque is not inside the answer's header\n");
        return 2;
    }
    pre = frame + 8;
    pre_len = at - 8;
    post = frame + at + len;
    post_len = 8 + hlen - at - len;
    body = frame + 8 + hlen;
    body_len = n - 8 - hlen;

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 1024) < 0
        || getsockname(ls, (struct sockaddr *)&sa, &sl) < 0) {
        perror("listen");
        return 1;
    }
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, events[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    for (;;) {
        int k = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < k; i++) {
            conn_t *c = events[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    c->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            int gone = 0;
            if (events[i].events & EPOLLOUT)
                gone = flush(ep, c) < 0;
            if (!gone && events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                gone = readable(ep, c) < 0;
            if (gone) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c->in);
                free(c->out);
                free(c);
            }
        }
    }
}

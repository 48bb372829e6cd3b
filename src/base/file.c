/* file.c — whole-file reads with a size bound, and atomic writes (temp file
 * in the same folder, fsync, rename) so a crash never leaves a half file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

int cv_read_file(const char *path, cv_buf *b, size_t max_bytes, cv_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cv_err_set(err, errno == ENOENT ? CV_ENOTFOUND : CV_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > max_bytes) {
        close(fd);
        return cv_err_set(err, CV_ELIMIT, "%s: %lld bytes, more than the %zu allowed", path, (long long)st.st_size,
                          max_bytes);
    }
    size_t start = b->len;
    for (;;) {
        cv_buf_reserve(b, 65536);
        ssize_t n = read(fd, b->data + b->len, 65536);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            return cv_err_set(err, CV_EIO, "%s: read: %s", path, strerror(e));
        }
        if (n == 0) break;
        b->len += (size_t)n;
        b->data[b->len] = 0;
        if (b->len - start > max_bytes) {
            close(fd);
            return cv_err_set(err, CV_ELIMIT, "%s: more than the %zu bytes allowed", path, max_bytes);
        }
    }
    close(fd);
    return 0;
}

int cv_write_file_atomic(const char *path, const void *data, size_t len, cv_err *err)
{
    cv_buf tmp = { 0 };
    cv_buf_printf(&tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = cv_err_set(err, CV_EIO, "%s: %s", tmp.data, strerror(errno));
        cv_buf_free(&tmp);
        return rc;
    }
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            int rc = cv_err_set(err, CV_EIO, "%s: write: %s", tmp.data, strerror(errno));
            close(fd);
            unlink(tmp.data);
            cv_buf_free(&tmp);
            return rc;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.data, path) != 0) {
        int rc = cv_err_set(err, CV_EIO, "%s: %s", path, strerror(errno));
        unlink(tmp.data);
        cv_buf_free(&tmp);
        return rc;
    }
    cv_buf_free(&tmp);
    return 0;
}

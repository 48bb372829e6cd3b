/* import_llama2c.c — turns a llama2.c checkpoint and its tokenizer.bin into
 * an F32 `llama` GGUF with a SentencePiece vocabulary.
 *
 * Checkpoint ("legacy" version 0), little-endian:
 *   7 × int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *   (vocab_size < 0 means a separate classifier follows; its magnitude is the vocab)
 *   float32 weights, each matrix row-major [out][in]:
 *     token_embedding [vocab][dim], rms_att [layer][dim], wq [layer][dim][dim],
 *     wk [layer][kv_dim][dim], wv [layer][kv_dim][dim], wo [layer][dim][dim],
 *     rms_ffn [layer][dim], w1 [layer][hidden][dim], w2 [layer][dim][hidden],
 *     w3 [layer][hidden][dim], rms_final [dim],
 *     freq_cis_real [seq_len][head/2], freq_cis_imag [seq_len][head/2] (skipped),
 *     wcls [vocab][dim] when not shared
 * A row-major [out][in] matrix is exactly a GGUF tensor with ne = {in, out}.
 * llama2.c rotates adjacent pairs within each head, which is the `llama`
 * architecture's own RoPE, so weights need no permutation.
 *
 * tokenizer.bin: int32 max_token_length, then vocab × { float32 score,
 * int32 len, len bytes }. Pieces use ' ' where SentencePiece uses U+2581;
 * BOS/EOS are stored as "\n<s>\n" / "\n</s>\n"; bytes as "<0xHH>". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"

enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6 }; /* tokenizer.ggml.token_type */

#define L2C_MAX_DIM (1 << 16)
#define L2C_MAX_LAYERS 1024
#define L2C_MAX_VOCAB (1 << 20)
#define L2C_MAX_SEQ (1 << 24)
#define L2C_MAX_PIECE 4096

typedef struct mapped {
    const uint8_t *p;
    size_t size;
} mapped;

static int map_file(const char *path, mapped *m, cv_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cv_err_set(err, errno == ENOENT ? CV_ENOTFOUND : CV_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return CV_CORRUPT(err, "%s: empty or unreadable", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return cv_err_set(err, CV_EIO, "%s: mmap: %s", path, strerror(e));
    m->p = p;
    m->size = (size_t)st.st_size;
    return 0;
}

static void unmap_file(mapped *m)
{
    if (m->p)
        munmap((void *)m->p, m->size);
    m->p = NULL;
}

typedef struct l2c_config {
    int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
    bool shared;
} l2c_config;

static int read_config(const char *path, const mapped *m, l2c_config *c, cv_err *err)
{
    if (m->size < 28)
        return CV_CORRUPT(err, "%s: %zu bytes is too small for a llama2.c header (28 bytes)", path, m->size);
    int32_t h[7];
    memcpy(h, m->p, sizeof h);
    c->dim = h[0];
    c->hidden = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->shared = h[5] > 0;
    c->vocab = h[5] < 0 ? -h[5] : h[5];
    c->seq_len = h[6];
    if (h[5] == INT32_MIN)
        c->vocab = 0;
    if (c->dim < 1 || c->dim > L2C_MAX_DIM || c->hidden < 1 || c->hidden > 8 * L2C_MAX_DIM || c->n_layers < 1 ||
        c->n_layers > L2C_MAX_LAYERS || c->n_heads < 1 || c->n_heads > c->dim || c->n_kv_heads < 1 ||
        c->n_kv_heads > c->n_heads || c->vocab < 1 || c->vocab > L2C_MAX_VOCAB || c->seq_len < 1 ||
        c->seq_len > L2C_MAX_SEQ)
        return CV_CORRUPT(err, "%s: header (dim %d, hidden %d, layers %d, heads %d, kv heads %d, vocab %d, seq %d) "
                          "is not a llama2.c checkpoint", path, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    if (c->dim % c->n_heads != 0 || c->n_heads % c->n_kv_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        return CV_CORRUPT(err, "%s: dim %d, heads %d, kv heads %d do not divide into even-sized heads", path,
                          c->dim, c->n_heads, c->n_kv_heads);
    return 0;
}

/* ---- tokenizer.bin → SentencePiece-style vocabulary ---- */

typedef struct l2c_vocab {
    cv_str *tokens;
    float *scores;
    int32_t *types;
    cv_buf text; /* storage for the converted pieces */
    size_t *offsets;
} l2c_vocab;

static void free_vocab(l2c_vocab *v)
{
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->offsets);
    cv_buf_free(&v->text);
}

static bool is_byte_piece(const uint8_t *s, int32_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    return len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && strchr(hex, s[3]) && s[3] &&
           strchr(hex, s[4]) && s[4] && s[5] == '>';
}

static int read_vocab(const char *path, const mapped *m, int32_t n, l2c_vocab *v, cv_err *err)
{
    size_t off = 4; /* max_token_length */
    if (m->size < 4)
        return CV_CORRUPT(err, "%s: too small for a llama2.c tokenizer", path);
    v->tokens = cv_xcalloc((size_t)n, sizeof *v->tokens);
    v->scores = cv_xcalloc((size_t)n, sizeof *v->scores);
    v->types = cv_xcalloc((size_t)n, sizeof *v->types);
    v->offsets = cv_xcalloc((size_t)n + 1, sizeof *v->offsets);
    for (int32_t i = 0; i < n; i++) {
        if (m->size - off < 8)
            return CV_CORRUPT(err, "%s: truncated at token %d of %d (offset %zu)", path, i, n, off);
        float score;
        int32_t len;
        memcpy(&score, m->p + off, 4);
        memcpy(&len, m->p + off + 4, 4);
        off += 8;
        if (len < 0 || len > L2C_MAX_PIECE || (size_t)len > m->size - off)
            return CV_CORRUPT(err, "%s: token %d has length %d (at offset %zu); must be 0..%d and inside the file",
                              path, i, len, off - 4, L2C_MAX_PIECE);
        const uint8_t *s = m->p + off;
        off += (size_t)len;
        v->scores[i] = score;
        v->offsets[i] = v->text.len;
        if (i == 0 && len == 5 && !memcmp(s, "<unk>", 5)) {
            v->types[i] = TOK_UNKNOWN;
            cv_buf_puts(&v->text, "<unk>");
        } else if ((len == 5 && !memcmp(s, "\n<s>\n", 5)) || (len == 3 && !memcmp(s, "<s>", 3))) {
            v->types[i] = TOK_CONTROL;
            cv_buf_puts(&v->text, "<s>");
        } else if ((len == 6 && !memcmp(s, "\n</s>\n", 6)) || (len == 4 && !memcmp(s, "</s>", 4))) {
            v->types[i] = TOK_CONTROL;
            cv_buf_puts(&v->text, "</s>");
        } else if (is_byte_piece(s, len)) {
            v->types[i] = TOK_BYTE;
            cv_buf_append(&v->text, s, (size_t)len);
        } else {
            v->types[i] = TOK_NORMAL;
            for (int32_t k = 0; k < len; k++) {
                if (s[k] == ' ')
                    cv_buf_puts(&v->text, "\xE2\x96\x81"); /* U+2581 */
                else
                    cv_buf_putc(&v->text, (char)s[k]);
            }
        }
    }
    v->offsets[n] = v->text.len;
    for (int32_t i = 0; i < n; i++)
        v->tokens[i] = (cv_str){ v->text.data + v->offsets[i], v->offsets[i + 1] - v->offsets[i] };
    return 0;
}

/* ---- weights ---- */

typedef struct wcursor {
    const float *p;
    size_t left; /* floats */
} wcursor;

static const float *take_floats(wcursor *c, size_t n)
{
    if (n > c->left)
        return NULL;
    const float *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}

static int add(cv_gguf_writer *w, const char *name, const float *data, int64_t in, int64_t out, cv_err *err)
{
    int64_t ne[2] = { in, out };
    return cv_gguf_writer_add_tensor(w, name, CV_GGML_F32, out > 1 ? 2 : 1, ne, data,
                                     (size_t)(in * out) * sizeof(float), err);
}

int cv_import_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path, cv_err *err)
{
    mapped ck = { 0 }, tk = { 0 };
    l2c_vocab vocab = { 0 };
    cv_gguf_writer *w = NULL;
    l2c_config c = { 0 };
    int rc;
    if ((rc = map_file(checkpoint_path, &ck, err)) || (rc = read_config(checkpoint_path, &ck, &c, err)))
        goto done;
    if ((rc = map_file(tokenizer_path, &tk, err)) || (rc = read_vocab(tokenizer_path, &tk, c.vocab, &vocab, err)))
        goto done;

    int64_t dim = c.dim, hid = c.hidden, L = c.n_layers, head = c.dim / c.n_heads, kv_dim = head * c.n_kv_heads;
    int64_t V = c.vocab;
    size_t expect = (size_t)(V * dim + L * dim * 2 + L * dim * dim * 2 + L * kv_dim * dim * 2 + L * hid * dim * 3 +
                             dim + (int64_t)c.seq_len * head + (c.shared ? 0 : V * dim));
    if ((ck.size - 28) % 4 != 0 || (ck.size - 28) / 4 != expect) {
        rc = CV_CORRUPT(err, "%s: %zu bytes of weights, but its header (dim %d, layers %d, vocab %d%s) needs %zu",
                        checkpoint_path, ck.size - 28, c.dim, c.n_layers, c.vocab,
                        c.shared ? ", shared classifier" : ", separate classifier", expect * 4);
        goto done;
    }
    wcursor wc = { (const float *)(ck.p + 28), expect };
    const float *tok = take_floats(&wc, (size_t)(V * dim));
    const float *rms_att = take_floats(&wc, (size_t)(L * dim));
    const float *wq = take_floats(&wc, (size_t)(L * dim * dim));
    const float *wk = take_floats(&wc, (size_t)(L * kv_dim * dim));
    const float *wv = take_floats(&wc, (size_t)(L * kv_dim * dim));
    const float *wo = take_floats(&wc, (size_t)(L * dim * dim));
    const float *rms_ffn = take_floats(&wc, (size_t)(L * dim));
    const float *w1 = take_floats(&wc, (size_t)(L * hid * dim));
    const float *w2 = take_floats(&wc, (size_t)(L * dim * hid));
    const float *w3 = take_floats(&wc, (size_t)(L * hid * dim));
    const float *rms_final = take_floats(&wc, (size_t)dim);
    take_floats(&wc, (size_t)c.seq_len * (size_t)head); /* freq_cis real + imag: recomputed by the engine */
    const float *wcls = c.shared ? NULL : take_floats(&wc, (size_t)(V * dim));

    w = cv_gguf_writer_create();
    const char *base = strrchr(checkpoint_path, '/');
    base = base ? base + 1 : checkpoint_path;
    size_t base_len = strcspn(base, ".");
    cv_gguf_writer_set_str(w, "general.architecture", CV_STR("llama"));
    cv_gguf_writer_set_str(w, "general.name", (cv_str){ base, base_len });
    cv_gguf_writer_set_u32(w, "general.file_type", 0); /* all F32 */
    cv_gguf_writer_set_u32(w, "llama.context_length", (uint32_t)c.seq_len);
    cv_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)dim);
    cv_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)L);
    cv_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)hid);
    cv_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)c.n_heads);
    cv_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c.n_kv_heads);
    cv_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)head);
    cv_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    cv_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    cv_gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)V);
    cv_gguf_writer_set_str(w, "tokenizer.ggml.model", CV_STR("llama"));
    cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", (uint64_t)V, vocab.tokens);
    cv_gguf_writer_set_arr(w, "tokenizer.ggml.scores", CV_GGUF_FLOAT32, (uint64_t)V, vocab.scores);
    cv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", CV_GGUF_INT32, (uint64_t)V, vocab.types);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    cv_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);

    rc = add(w, "token_embd.weight", tok, dim, V, err);
    char name[64];
    for (int64_t l = 0; l < L && !rc; l++) {
#define ADD(suffix, ptr, in, out)                                                   \
        if (!rc) {                                                                  \
            snprintf(name, sizeof name, "blk.%lld." suffix, (long long)l);           \
            rc = add(w, name, (ptr), (in), (out), err);                             \
        }
        ADD("attn_norm.weight", rms_att + l * dim, dim, 1);
        ADD("attn_q.weight", wq + l * dim * dim, dim, dim);
        ADD("attn_k.weight", wk + l * kv_dim * dim, dim, kv_dim);
        ADD("attn_v.weight", wv + l * kv_dim * dim, dim, kv_dim);
        ADD("attn_output.weight", wo + l * dim * dim, dim, dim);
        ADD("ffn_norm.weight", rms_ffn + l * dim, dim, 1);
        ADD("ffn_gate.weight", w1 + l * hid * dim, dim, hid);
        ADD("ffn_down.weight", w2 + l * dim * hid, hid, dim);
        ADD("ffn_up.weight", w3 + l * hid * dim, dim, hid);
#undef ADD
    }
    if (!rc)
        rc = add(w, "output_norm.weight", rms_final, dim, 1, err);
    if (!rc && wcls)
        rc = add(w, "output.weight", wcls, dim, V, err);
    if (!rc)
        rc = cv_gguf_writer_write(w, out_path, err);
done:
    cv_gguf_writer_destroy(w);
    free_vocab(&vocab);
    unmap_file(&ck);
    unmap_file(&tk);
    return rc;
}

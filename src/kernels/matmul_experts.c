/* matmul_experts.c — expert-routed matmuls (mixture of experts): rows
 * grouped by expert with a counting sort, each expert's input rows
 * gathered contiguous and multiplied by its matrix in one matmul, the
 * results scattered back in route order. */
#include <stdlib.h>

#include "kernels/kernels_int.h"

struct cv_mm_ws {
    int64_t max_rows, max_n_in, max_n_out;
    int32_t n_expert;
    int64_t *start;  /* [n_expert + 1] */
    int64_t *order;  /* [max_rows] routes grouped by expert */
    float *xg, *yg;  /* [max_rows][max_n_in], [max_rows][max_n_out] */
};

cv_mm_ws *cv_mm_ws_create(int64_t max_rows, int64_t max_n_in, int64_t max_n_out, int32_t n_expert)
{
    cv_mm_ws *ws = cv_xcalloc(1, sizeof *ws);
    ws->max_rows = max_rows;
    ws->max_n_in = max_n_in;
    ws->max_n_out = max_n_out;
    ws->n_expert = n_expert;
    ws->start = cv_xmalloc(((size_t)n_expert + 1) * sizeof *ws->start);
    ws->order = cv_xmalloc((size_t)CV_MAX(1, max_rows) * sizeof *ws->order);
    ws->xg = cv_aligned_alloc((size_t)CV_MAX(1, max_rows * max_n_in) * sizeof(float));
    ws->yg = cv_aligned_alloc((size_t)CV_MAX(1, max_rows * max_n_out) * sizeof(float));
    return ws;
}

void cv_mm_ws_destroy(cv_mm_ws *ws)
{
    if (!ws)
        return;
    free(ws->start);
    free(ws->order);
    cv_aligned_free(ws->xg);
    cv_aligned_free(ws->yg);
    free(ws);
}

void cv_matmul_experts(cv_pool *pool, const cv_wmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                       int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y,
                       int64_t ldy, cv_mm_ws *ws)
{
    (void)n_x;
    assert(n_rows <= ws->max_rows && n_expert <= ws->n_expert);
    memset(ws->start, 0, ((size_t)n_expert + 1) * sizeof *ws->start);
    for (int64_t r = 0; r < n_rows; r++)
        ws->start[expert[r] + 1]++;
    for (int32_t e = 0; e < n_expert; e++)
        ws->start[e + 1] += ws->start[e];
    for (int64_t r = 0; r < n_rows; r++)
        ws->order[ws->start[expert[r]]++] = r;
    for (int32_t e = n_expert; e > 0; e--)
        ws->start[e] = ws->start[e - 1];
    ws->start[0] = 0;
    for (int32_t e = 0; e < n_expert; e++) {
        const int64_t r0 = ws->start[e], n = ws->start[e + 1] - r0;
        if (n == 0)
            continue;
        const int64_t n_in = cv_wmat_n_in(w[e]), n_out = cv_wmat_n_out(w[e]);
        assert(n_in <= ws->max_n_in && n_out <= ws->max_n_out);
        for (int64_t i = 0; i < n; i++) {
            const int64_t r = ws->order[r0 + i];
            memcpy(ws->xg + i * n_in, x + (src ? src[r] : r) * ldx, (size_t)n_in * sizeof(float));
        }
        cv_matmul(pool, w[e], n, ws->xg, ws->yg);
        for (int64_t i = 0; i < n; i++)
            memcpy(y + ws->order[r0 + i] * ldy, ws->yg + i * n_out, (size_t)n_out * sizeof(float));
    }
}

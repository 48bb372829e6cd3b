/* act.cu — the work a matmul does before its products: quantizing f32
 * activation rows into cv_act_q8 blocks (once per call, whatever the
 * number of weight rows or experts that read them), and grouping an
 * expert-routed call's routes by expert into tiles of CV_ROUTE_TILE for
 * mm.cu's grouped kernel. */
#include "common.cuh"

/* Rows of n_in values (ldx floats apart) into blocks of 32: row r's block
 * g at out + r * out_ld + g. Grid (ceil(n_in / 256), n_rows), 256 threads:
 * a warp a block, a lane a value; d = max|x| / 127 and levels rounded to
 * nearest, as the CPU's q8_1 (dt_q8_1.c) but with f32 scale and sums. */
extern "C" __global__ void __launch_bounds__(256)
    cv_quantize_q8(const float *x, i64 ldx, i64 n_in, cv_act_q8 *out, i64 out_ld)
{
    const i64 row = blockIdx.y, g = (i64)blockIdx.x * 8 + threadIdx.x / CV_WARP;
    const int lane = threadIdx.x % CV_WARP;
    if (g * 32 >= n_in)
        return;
    const float v = x[row * ldx + g * 32 + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(CV_FULL_MASK, amax, off));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    const int q = __float2int_rn(v * id);
    int half = q;
#pragma unroll
    for (int off = 8; off > 0; off >>= 1)
        half += __shfl_xor_sync(CV_FULL_MASK, half, off);
    cv_act_q8 *b = out + row * out_ld + g;
    ((i8 *)b->qs)[lane] = (i8)q;
    if (lane == 0) {
        b->d = d;
        b->s0 = d * (float)half;
        b->pad = 0.0f;
    } else if (lane == 16) {
        b->s1 = d * (float)half;
    }
}

/* The n_rows routes of an expert-routed call grouped by expert, each
 * expert's in their order: order[] lists route indices expert by expert,
 * tiles[k] = (expert, first index into order, routes, 0) for tiles of up
 * to CV_ROUTE_TILE, *n_tiles their number. One block; dynamic shared
 * memory of 2 ints per expert. */
extern "C" __global__ void cv_route_group(const int *expert, int n_rows, int n_expert, int *order, int4 *tiles,
                                          int *n_tiles)
{
    extern __shared__ int sh[];
    int *cnt = sh, *first = sh + n_expert;
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
        int c = 0;
        for (int r = 0; r < n_rows; r++)
            c += expert[r] == e;
        cnt[e] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int routes = 0, nt = 0;
        for (int e = 0; e < n_expert; e++) {
            const int c = cnt[e];
            first[e] = routes;
            cnt[e] = nt; /* now the expert's first tile */
            routes += c;
            nt += (c + CV_ROUTE_TILE - 1) / CV_ROUTE_TILE;
        }
        *n_tiles = nt;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
        int k = 0;
        for (int r = 0; r < n_rows; r++) {
            if (expert[r] != e)
                continue;
            order[first[e] + k] = r;
            if (k % CV_ROUTE_TILE == 0)
                tiles[cnt[e] + k / CV_ROUTE_TILE] = make_int4(e, first[e] + k, 0, 0);
            k++;
        }
        for (int t = 0; t * CV_ROUTE_TILE < k; t++)
            tiles[cnt[e] + t].z = min(CV_ROUTE_TILE, k - t * CV_ROUTE_TILE);
    }
}
